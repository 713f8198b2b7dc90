package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

func startEcho(t *testing.T) (*bus.Operator, func(token, tool string, body []byte) ([]byte, error)) {
	t.Helper()
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	tools := map[string]bus.Handler{
		"echo": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			return map[string]any{"caller": r.Caller.SessionKey, "sandboxed": r.Caller.Sandboxed, "len": len(r.Body)}, nil
		}),
		"boom": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			return nil, context.DeadlineExceeded
		}),
		"bad": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			return nil, bus.BadRequest("sessionKey required")
		}),
	}
	svc, err := bus.Serve(nc, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	return op, func(token, tool string, body []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return bus.Call(ctx, nc, names, token, tool, body)
	}
}

func code(t *testing.T, err error) int {
	t.Helper()
	e, ok := bus.AsError(err)
	if !ok {
		t.Fatalf("want a thrown *bus.Error, got %v", err)
	}
	return e.Code
}

func TestTransportErrors(t *testing.T) {
	op, call := startEcho(t)
	tok, err := op.Mint(bus.Caller{SessionKey: "agent:main:main", Sandboxed: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(tok, "echo", []byte(`{}`))
	if err != nil || !strings.Contains(string(out), `"caller":"agent:main:main"`) || !strings.Contains(string(out), `"sandboxed":true`) {
		t.Fatalf("echo: %s %v", out, err)
	}
	if _, err := call("", "echo", nil); code(t, err) != 401 {
		t.Fatal("missing token must be 401")
	}
	if _, err := call("not-a-token", "echo", nil); code(t, err) != 401 {
		t.Fatal("garbage token must be 401")
	}
	other, _ := bus.NewOperator()
	foreign, _ := other.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	if _, err := call(foreign, "echo", nil); code(t, err) != 401 {
		t.Fatal("token of another operator must be 401")
	}
	if _, err := call(tok, "nope", nil); code(t, err) != 404 {
		t.Fatal("unknown tool must be 404")
	}
	if _, err := call(tok, "echo", make([]byte, bus.MaxRequestBytes+1)); code(t, err) != 413 {
		t.Fatal("oversized body must be 413")
	}
	if _, err := call(tok, "boom", nil); code(t, err) != 500 {
		t.Fatal("internal fault must be 500")
	} else if _, err := call(tok, "boom", nil); strings.Contains(err.Error(), "deadline") {
		t.Fatalf("internal detail leaked to the caller: %v", err)
	}
	if _, err := call(tok, "bad", nil); code(t, err) != 400 || err.Error() != "sessionKey required" {
		t.Fatalf("bad request: %v", err)
	}
}

func TestVerifierExpiry(t *testing.T) {
	op, _ := bus.NewOperator()
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main", AgentID: "main", RunID: "r1"}, time.Minute)
	v := bus.NewVerifier(op.PublicKey())
	c, err := v.Verify(tok)
	if err != nil || c.AgentID != "main" || c.RunID != "r1" {
		t.Fatalf("verify: %+v %v", c, err)
	}
	late := bus.NewVerifierAt(op.PublicKey(), func() time.Time { return time.Now().Add(2 * time.Minute) })
	if _, err := late.Verify(tok); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token accepted: %v", err)
	}
	// cached verification still honours expiry
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorCreds(t *testing.T) {
	dir := t.TempDir()
	a, err := bus.LoadOrCreateOperator(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.LoadOrCreateOperator(dir)
	if err != nil || a.PublicKey() != b.PublicKey() {
		t.Fatalf("operator key not kept across restarts: %v", err)
	}
}

// TestToolDeliveredOnce: a request to a known tool reaches the worker's
// connection once and runs one handler invocation; a catch-all for unknown
// tools must not receive a second copy of it.
func TestToolDeliveredOnce(t *testing.T) {
	s := bustest.Server(t)
	client, _ := bustest.Connect(t, s)
	worker, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	var calls atomic.Int64
	tools := map[string]bus.Handler{
		"count": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			return map[string]any{"n": calls.Add(1)}, nil
		}),
	}
	svc, err := bus.Serve(worker, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	const n = 20
	before := worker.Stats().InMsgs
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := bus.Call(ctx, client, names, tok, "count", []byte(`{}`))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	// a round trip on the worker's connection: whatever the server sent it
	// before the answer has been read and counted
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := worker.Stats().InMsgs - before; got != n {
		t.Errorf("the worker's connection received %d messages for %d requests; want one each", got, n)
	}
	if got := calls.Load(); got != n {
		t.Errorf("%d handler invocations for %d requests", got, n)
	}
}

// TestStatsCountAsyncReplies asks the micro monitoring subjects: every
// request counts on its tool's endpoint, a thrown error counts as an error
// there even though the reply is sent after the subscription callback
// returned, and processing time lasts until the reply is sent.
func TestStatsCountAsyncReplies(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	const work = 20 * time.Millisecond
	tools := map[string]bus.Handler{
		"work": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			time.Sleep(work) // the handler's own work, not a synchronisation
			if string(r.Body) == `{"fail":true}` {
				return nil, bus.BadRequest("fail was asked for")
			}
			return map[string]any{}, nil
		}),
		"idle": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) { return nil, nil }),
	}
	svc, err := bus.Serve(nc, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	call := bustest.Caller(nc, names, tok)
	for i := 0; i < 4; i++ {
		if err := call("work", `{}`); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if code(t, call("work", `{"fail":true}`)) != 400 {
			t.Fatal("want a 400")
		}
	}
	if code(t, call("work", string(make([]byte, bus.MaxRequestBytes+1)))) != 413 {
		t.Fatal("want a 413")
	}
	if code(t, call("nope", `{}`)) != 404 {
		t.Fatal("want a 404")
	}

	msg, err := nc.Request("$SRV.STATS."+bus.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.Type != micro.StatsResponseType || st.Name != bus.ServiceName || st.ID == "" {
		t.Fatalf("stats %v: %s", err, msg.Data)
	}
	byName := map[string]*micro.EndpointStats{}
	for _, e := range st.Endpoints {
		byName[e.Name] = e
	}
	w := byName["work"]
	if w == nil {
		t.Fatalf("no endpoint work: %s", msg.Data)
	}
	if w.NumRequests != 7 || w.NumErrors != 3 {
		t.Errorf("work: %d requests, %d errors; want 7 and 3", w.NumRequests, w.NumErrors)
	}
	if w.ProcessingTime < 6*work {
		t.Errorf("work: processing time %v, less than the %v its six handled calls took", w.ProcessingTime, 6*work)
	}
	if w.Subject != names.Tool("work") || w.QueueGroup == "" {
		t.Errorf("work: subject %q, queue group %q", w.Subject, w.QueueGroup)
	}
	for name, e := range byName {
		if name != "work" && e.NumRequests != 0 {
			t.Errorf("endpoint %s (%s) counted %d requests", name, e.Subject, e.NumRequests)
		}
	}

	msg, err = nc.Request("$SRV.INFO."+bus.ServiceName+"."+st.ID, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Type != micro.InfoResponseType || len(info.Endpoints) != 2 {
		t.Fatalf("info %v: %s", err, msg.Data)
	}
	msg, err = nc.Request("$SRV.PING", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Type != micro.PingResponseType || ping.ID != st.ID {
		t.Fatalf("ping %v: %s", err, msg.Data)
	}
}

// TestShutdownDrainsFirst: Shutdown first stops taking requests, then lets
// a handler in flight finish with its own answer; a handler that only
// waits is ended once the grace is over, with a context that says the
// service is stopping, and its answer still reaches the caller.
func TestShutdownDrainsFirst(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	entered := make(chan string, 2)
	release := make(chan struct{})
	tools := map[string]bus.Handler{
		"wait": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			entered <- "wait"
			<-ctx.Done()
			return map[string]any{"stopping": bus.Stopping(ctx)}, nil
		}),
		"work": bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
			entered <- "work"
			select {
			case <-release:
				return map[string]any{"done": true}, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}),
	}
	svc, err := bus.Serve(nc, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey())})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	type answer struct {
		out []byte
		err error
	}
	call := func(tool string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := bus.Call(ctx, nc, names, tok, tool, nil)
			ch <- answer{out, err}
		}()
		return ch
	}
	waitAns, workAns := call("wait"), call("work")
	for range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the handlers were not called")
		}
	}

	const grace = 3 * time.Second
	stopped := make(chan time.Duration, 1)
	began := time.Now()
	go func() { svc.Shutdown(grace); stopped <- time.Since(began) }()
	// no worker takes a new request once the shutdown began
	bustest.WaitFor(t, 10*time.Second, "no responders on the tools", func() bool {
		_, err := nc.Request(names.Tool("work"), nil, 5*time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
	close(release)
	select {
	case a := <-workAns:
		if a.err != nil || string(a.out) != `{"done":true}` {
			t.Fatalf("the handler in flight answered %s %v; want its own answer", a.out, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler in flight did not answer")
	}
	select {
	case a := <-waitAns:
		if a.err != nil || string(a.out) != `{"stopping":true}` {
			t.Fatalf("the waiting handler answered %s %v; want {\"stopping\":true}", a.out, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting handler did not answer")
	}
	select {
	case took := <-stopped:
		if took < grace {
			t.Fatalf("Shutdown returned after %v, before its grace of %v", took, grace)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}
