// Package handlerstest runs the whole tool stack for tests: a real embedded
// server on a random loopback port, an operator key, and a worker.
package handlerstest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// Stack is one server with one worker.
type Stack struct {
	T        testing.TB
	Server   *embedded.Server
	Conn     *nats.Conn
	Operator *bus.Operator
	Worker   *handlers.Worker
	Config   *config.Config
}

// Start runs a stack; edit adjusts the default config first (may be nil),
// opts the worker (a fake signal log, a human-turn hook).
func Start(t testing.TB, edit func(*config.Config), opts ...handlers.WorkerOption) *Stack {
	t.Helper()
	cfg := config.Default()
	if edit != nil {
		edit(cfg)
	}
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil, opts...)
	if err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return &Stack{T: t, Server: s, Conn: nc, Operator: op, Worker: w, Config: cfg}
}

// Token mints a caller token.
func (s *Stack) Token(c bus.Caller) string {
	s.T.Helper()
	tok, err := s.Operator.Mint(c, time.Hour)
	if err != nil {
		s.T.Fatal(err)
	}
	return tok
}

// Call calls tool as the session `as` and decodes the reply; a thrown error
// is returned as *bus.Error.
func (s *Stack) Call(as, tool, params string) (map[string]any, error) {
	return s.CallAs(bus.Caller{SessionKey: as}, tool, params)
}

// CallAs is Call with a full caller (sandboxed, agent id...).
func (s *Stack) CallAs(c bus.Caller, tool, params string) (map[string]any, error) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data, err := bus.Call(ctx, s.Conn, s.Worker.Deps.Names, s.Token(c), tool, []byte(params))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		s.T.Fatalf("reply of %s is not a JSON object: %v: %s", tool, err, data)
	}
	return out, nil
}

// MustCall fails the test on a thrown error.
func (s *Stack) MustCall(as, tool, params string) map[string]any {
	s.T.Helper()
	out, err := s.Call(as, tool, params)
	if err != nil {
		s.T.Fatalf("%s %s as %s: %v", tool, params, as, err)
	}
	return out
}

// Import loads JSONL lines into a session.
func (s *Stack) Import(o importer.ImportOptions, lines ...string) *importer.ImportResult {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := s.Worker.Deps
	res, err := importer.Import(ctx, d.Store, d.Transcripts, o, strings.NewReader(strings.Join(lines, "\n")), time.Now())
	if err != nil {
		s.T.Fatalf("import %s: %v", o.SessionKey, err)
	}
	if err := d.Index.Sync(ctx); err != nil {
		s.T.Fatal(err)
	}
	return res
}

// Update edits a session entry in the store (compare-and-set) and waits
// until the worker's index has it.
func (s *Stack) Update(key string, fn func(*sessions.Entry)) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, rev, err := s.Worker.Deps.Store.Update(ctx, key, func(e *sessions.Entry) error { fn(e); return nil })
	if err != nil {
		s.T.Fatalf("update %s: %v", key, err)
	}
	if err := s.Worker.Deps.Index.WaitApplied(ctx, rev); err != nil {
		s.T.Fatal(err)
	}
}

// Put writes an entry as given (creating or replacing it).
func (s *Stack) Put(e *sessions.Entry) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Worker.Deps.Store.Create(ctx, e); err != nil {
		s.T.Fatalf("create %s: %v", e.Key, err)
	}
	// A test calls a tool next: the worker's watched index must hold the
	// entry first, or a read may run before the watch delivers it.
	if err := s.Worker.Deps.Index.Sync(ctx); err != nil {
		s.T.Fatalf("index sync after creating %s: %v", e.Key, err)
	}
}
