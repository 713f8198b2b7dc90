package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

func TestMain(m *testing.M) {
	os.Exit(bustest.CheckLeaks(m.Run()))
}

// rig is a deployment's stores on an embedded server, for an indexer to
// follow.
type rig struct {
	t     testing.TB
	srv   *embedded.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	names bus.Names
	ss    *sessions.Store
	tr    *transcripts.Store
	ops   *lifecycle.Ops
	dir   string
}

func newRig(t testing.TB) *rig {
	t.Helper()
	srv := bustest.Server(t)
	nc, js := bustest.Connect(t, srv)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	ss, err := sessions.Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcripts.Open(ctx, nc, js, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	ar, err := archives.Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	ops := &lifecycle.Ops{JS: js, Sessions: ss, Transcripts: tr, Archives: ar}
	return &rig{t: t, srv: srv, nc: nc, js: js, names: names, ss: ss, tr: tr, ops: ops, dir: t.TempDir()}
}

// session creates key's entry and appends texts, alternately a user's and
// an assistant's.
func (r *rig) session(key string, texts ...string) {
	r.t.Helper()
	ctx := bustest.Context(r.t)
	if _, _, err := r.ss.Get(ctx, key); errors.Is(err, sessions.ErrNotFound) {
		if _, err := r.ss.Create(ctx, &sessions.Entry{Key: key, SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli(), Channel: "webchat"}); err != nil {
			r.t.Fatal(err)
		}
	}
	if len(texts) == 0 {
		return
	}
	if _, err := r.tr.Append(ctx, bus.EncodeKey(key), messages(texts...)...); err != nil {
		r.t.Fatal(err)
	}
}

func messages(texts ...string) [][]byte {
	out := make([][]byte, len(texts))
	for i, s := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b, _ := json.Marshal(map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": s}}})
		out[i] = b
	}
	return out
}

func (r *rig) start(o Options) *Indexer {
	r.t.Helper()
	o.NC, o.JS, o.Names = r.nc, r.js, r.names
	if o.Path == "" {
		o.Path = filepath.Join(r.dir, "search.db")
	}
	if o.Refresh == 0 {
		o.Refresh = 50 * time.Millisecond
	}
	in, err := Start(bustest.Context(r.t), o)
	if err != nil {
		r.t.Fatal(err)
	}
	return in
}

// caughtUp waits until in has applied every entry of the stream.
func (r *rig) caughtUp(in *Indexer) {
	r.t.Helper()
	info, err := r.js.Stream(bustest.Context(r.t), r.names.TranscriptsStream())
	if err != nil {
		r.t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	if i, err := info.Info(bustest.Context(r.t)); err == nil {
		last = i.State.LastSeq
	}
	bustest.WaitFor(r.t, 20*time.Second, fmt.Sprintf("indexer at stream sequence %d", last), func() bool {
		st := in.Status()
		return st.State == StateReady && (st.Applied >= last || in.caught.Load() >= last)
	})
}

func (r *rig) find(in *Indexer, text string) []Hit {
	r.t.Helper()
	q, err := Parse([]byte(fmt.Sprintf(`{"query":%q}`, text)))
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := in.Search(context.Background(), q)
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Results
}
