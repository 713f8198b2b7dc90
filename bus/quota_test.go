package bus_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A refusal by the quota check is a 429 whose wait the caller can read
// three ways (message, body field, headers), sent before the handler runs;
// a request without a valid token is refused before the quota is asked.
func TestQuotaRefusal(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	var handled, asked atomic.Int64
	tools := map[string]bus.Handler{"echo": bus.HandlerFunc(func(context.Context, *bus.Request) (any, error) {
		handled.Add(1)
		return map[string]any{"ok": true}, nil
	})}
	svc, err := bus.Serve(nc, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey()),
		Quota: func(c bus.Caller) *bus.Error {
			asked.Add(1)
			if c.SessionKey == "agent:main:flood" {
				return bus.TooManyRequests(1250*time.Millisecond, "too many tool calls from session agent:main:flood")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mint := func(key string) string {
		tok, err := op.Mint(bus.Caller{SessionKey: key}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	flood, quiet := mint("agent:main:flood"), mint("agent:main:quiet")

	_, err = bus.Call(ctx, nc, names, flood, "echo", nil)
	e, ok := bus.AsError(err)
	if !ok || e.Code != bus.CodeTooManyRequests || e.RetryAfter() != 1250*time.Millisecond ||
		e.Message != "too many tool calls from session agent:main:flood; retry after 1.25s" {
		t.Fatalf("flood: %#v (%v), want a 429 retrying after 1.25s", e, err)
	}
	if _, err := bus.Call(ctx, nc, names, quiet, "echo", nil); err != nil {
		t.Fatalf("another session: %v", err)
	}

	msg := nats.NewMsg(names.Tool("echo"))
	msg.Header.Set(bus.HeaderToken, flood)
	msg.Data = []byte("{}")
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	h := reply.Header
	if h.Get(bus.HeaderServiceCode) != "429" || h.Get(bus.HeaderRetryAfterMs) != "1250" || h.Get(bus.HeaderRetryAfter) != "2" {
		t.Fatalf("headers %v: want code 429, Retry-After-Ms 1250, Retry-After 2 (seconds, rounded up)", h)
	}
	var body bus.Error
	if err := json.Unmarshal(reply.Data, &body); err != nil || body.RetryAfterMs != 1250 || body.Code != 429 {
		t.Fatalf("body %s: want {code 429, retryAfterMs 1250} (%v)", reply.Data, err)
	}

	if handled.Load() != 1 {
		t.Fatalf("handler ran %d times, want once (the quiet session's call only)", handled.Load())
	}
	before := asked.Load()
	if _, err := bus.Call(ctx, nc, names, "not-a-token", "echo", nil); code(t, err) != bus.CodeUnauthorized {
		t.Fatal("a bad token must be 401")
	}
	if asked.Load() != before {
		t.Fatal("the quota was asked about a request whose token was refused")
	}
}

// A 429 marked Hold is sent when its hold is over, telling what is left of
// the wait; other callers are answered meanwhile; past MaxHeldReplies a
// refusal is answered at once; Stop sends the held ones before it returns.
func TestQuotaHeldRefusal(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	tools := map[string]bus.Handler{"echo": bus.HandlerFunc(func(context.Context, *bus.Request) (any, error) {
		return map[string]any{"ok": true}, nil
	})}
	svc, err := bus.Serve(nc, tools, bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey()), MaxHeldReplies: 1,
		Quota: func(c bus.Caller) *bus.Error {
			switch c.SessionKey {
			case "agent:main:loop":
				return bus.TooManyRequests(250*time.Millisecond, "over").Hold(100 * time.Millisecond)
			case "agent:main:long":
				return bus.TooManyRequests(time.Hour, "over").Hold(time.Hour)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			svc.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mint := func(key string) string {
		tok, err := op.Mint(bus.Caller{SessionKey: key}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	start := time.Now()
	_, err = bus.Call(ctx, nc, names, mint("agent:main:loop"), "echo", nil)
	e, ok := bus.AsError(err)
	if !ok || e.Code != bus.CodeTooManyRequests || e.RetryAfter() != 150*time.Millisecond || e.Message != "over; retry after 150ms" {
		t.Fatalf("held refusal: %v, want a 429 with the 150ms left of its wait", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("answered after %v, before its 100ms hold", d)
	}

	// one reply held (the bound): a second is answered at once, with its
	// whole wait, and so is every other caller
	long := make(chan error, 1)
	go func() {
		_, err := bus.Call(ctx, nc, names, mint("agent:main:long"), "echo", nil)
		long <- err
	}()
	bustest.WaitFor(t, 10*time.Second, "a held reply", func() bool { return svc.HeldReplies() == 1 })
	_, err = bus.Call(ctx, nc, names, mint("agent:main:loop"), "echo", nil)
	if e, ok := bus.AsError(err); !ok || e.RetryAfter() != 250*time.Millisecond {
		t.Fatalf("refusal past the bound: %v, want one answered at once with its whole 250ms wait", err)
	}
	if _, err := bus.Call(ctx, nc, names, mint("agent:main:quiet"), "echo", nil); err != nil {
		t.Fatalf("another caller while a reply is held: %v", err)
	}
	select {
	case err := <-long:
		t.Fatalf("the hour-long hold was answered early: %v", err)
	default:
	}
	// Stop does not wait out the hold, but sends it: the caller is told
	svc.Shutdown(0)
	stopped = true
	err = <-long
	if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeTooManyRequests {
		t.Fatalf("held reply at Stop: %v, want its 429", err)
	}
}
