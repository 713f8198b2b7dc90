package handlers

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/rules"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// benchEntry is session i of a synthetic inventory shaped like the
// `sessionbus bench` one: direct chats, groups and labelled sub-agents.
func benchEntry(i int, now int64) *sessions.Entry {
	chs := [...]string{"telegram", "whatsapp", "discord", "slack", "signal"}
	ch := chs[i%len(chs)]
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 31
	e := &sessions.Entry{
		AgentID:       "main",
		SessionID:     fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h), uint16(h>>32), uint16(h>>48)&0xfff, i&0xfff, i),
		UpdatedAt:     now - int64(h%(30*24*3600*1000)),
		Channel:       ch,
		LastChannel:   ch,
		Model:         "gpt-5.2",
		ModelProvider: "openai",
		InputTokens:   int64(h % 90_000),
		OutputTokens:  int64(h % 9_000),
		ContextTokens: 200_000,
	}
	e.TotalTokens = e.InputTokens + e.OutputTokens
	switch i % 10 {
	case 7, 8:
		e.Key = fmt.Sprintf("agent:main:%s:group:g%07d", ch, i)
		e.ChatType = "group"
		e.DisplayName = fmt.Sprintf("%s group %d", ch, i)
		e.Origin = &sessions.Origin{Provider: ch, ChatType: "group"}
		e.DeliveryContext = &sessions.DeliveryContext{Channel: ch, To: fmt.Sprintf("g%07d", i)}
	case 9:
		e.Key = "agent:main:subagent:" + e.SessionID
		e.SpawnedBy = fmt.Sprintf("agent:main:%s:direct:u%07d", chs[(i-9)%len(chs)], i-9)
		e.Label = fmt.Sprintf("research task %d", i)
		e.Channel, e.LastChannel = "", ""
	default:
		e.Key = fmt.Sprintf("agent:main:%s:direct:u%07d", ch, i)
		e.ChatType = "direct"
		e.DisplayName = fmt.Sprintf("%s user %d", ch, i)
		e.Origin = &sessions.Origin{Provider: ch, ChatType: "direct"}
		e.DeliveryContext = &sessions.DeliveryContext{Channel: ch, To: fmt.Sprintf("u%07d", i)}
	}
	return e
}

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
		e := benchEntry(i, now)
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
		if _, err := sessionsList(ctx, d, r, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList100k(b *testing.B) { benchList(b, 100_000, `{"limit":100}`) }
func BenchmarkListSearch100k(b *testing.B) {
	benchList(b, 100_000, `{"limit":100,"search":"research task 99989"}`)
}
