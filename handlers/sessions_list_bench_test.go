package handlers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

func benchList(b *testing.B, n int, params string) {
	s := bustest.Server(b)
	nc, js := bustest.Connect(b, s)
	cfg := config.Default()
	cfg.Tools.Sessions.Visibility = "agent"
	ctx := b.Context()
	w, err := StartWorker(ctx, nc, cfg, bus.NewVerifier("x"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ajs, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	_ = js
	now := time.Now().UnixMilli()
	subj := "$KV." + w.Deps.Names.SessionsBucket() + "."
	for i := range n {
		e := sessions.Sample(i, now)
		data, _ := json.Marshal(e)
		if _, err := ajs.PublishAsync(subj+bus.EncodeKey(e.Key), data); err != nil {
			b.Fatal(err)
		}
		if i%2000 == 1999 {
			<-ajs.PublishAsyncComplete()
		}
	}
	<-ajs.PublishAsyncComplete()
	if err := w.Deps.Index.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	d := w.Deps
	r, _ := d.newRequester(bus.Caller{SessionKey: "agent:main:main"})
	p, err := rules.ParseParams([]byte(params))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := sessionsList(ctx, d, r, p)
		if err != nil {
			b.Fatal(err)
		}
		if lent, ok := res.(*bus.Lent); ok {
			lent.Release() // as the service does once the reply is sent
		}
	}
}

func BenchmarkList100k(b *testing.B) { benchList(b, 100_000, `{"limit":100}`) }
func BenchmarkListSearch100k(b *testing.B) {
	benchList(b, 100_000, `{"limit":100,"search":"research task 99989"}`)
}
