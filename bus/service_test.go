package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startEcho(t *testing.T) (*bus.Operator, func(token, tool string, body []byte) ([]byte, error)) {
	t.Helper()
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
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
