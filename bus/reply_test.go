package bus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// refusedCounter is a ToolObserver that counts refused replies by endpoint.
type refusedCounter struct {
	refused atomic.Int64
	tools   atomic.Int64
}

func (r *refusedCounter) ToolDone(string, time.Duration, string) { r.tools.Add(1) }
func (r *refusedCounter) ReplyRefused(string)                    { r.refused.Add(1) }

// TestRepliesOnlyToInboxes: a request whose reply subject is not an inbox
// is dropped before any handler runs, and nothing is published there. The
// service's connection may write buckets and streams, so answering on the
// caller's chosen subject wrote the reply into a session entry.
func TestRepliesOnlyToInboxes(t *testing.T) {
	s := bustest.Server(t)
	workerNC, _ := bustest.Connect(t, s)
	callerNC, _ := bustest.Connect(t, s)
	victimNC, _ := bustest.Connect(t, s)
	op, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	names := bus.NewNames("")
	var ran atomic.Int64
	h := bus.HandlerFunc(func(context.Context, *bus.Request) (any, error) {
		ran.Add(1)
		return map[string]any{"ok": true}, nil
	})
	obs := &refusedCounter{}
	svc, err := bus.Serve(workerNC, map[string]bus.Handler{"echo": h}, bus.ServiceOptions{
		Names: names, Verifier: bus.NewVerifier(op.PublicKey()), Observer: obs,
		Inbound: h, Schema: h, Ops: map[string]bus.Handler{"delete": h},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)

	// every subject a forged reply names (the requests themselves go to
	// sb.* and $SRV.*, not watched here)
	var landed atomic.Int64
	for _, subj := range []string{"$KV.>", "$JS.API.>", names.Deliver(">"), "_INBOX", "_INBOX.a.>"} {
		sub, err := victimNC.Subscribe(subj, func(*nats.Msg) { landed.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := victimNC.Flush(); err != nil {
		t.Fatal(err)
	}
	tok, err := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	forged := []struct{ subject, reply string }{
		{names.Tool("echo"), "$KV.sessions.agent.main.victim"},
		{names.Tool("echo"), "$JS.API.STREAM.DELETE.SB_RUNS"},
		{names.Tool("echo"), names.Deliver("telegram")},
		{names.Tool("echo"), "_INBOX"},
		{names.Tool("echo"), "_INBOX.>"},
		{names.Tool("echo"), "_INBOX.a.*"},
		{names.Tool("nosuch"), "$KV.runs.r1"},
		{names.Inbound(), "$KV.lanes.agent.main.victim"},
		{names.Schema(), "$KV.sessions.agent.main.victim"},
		{names.SessionOp("delete"), "$KV.sessions.agent.main.victim"},
		{"$SRV.PING", "$KV.sessions.agent.main.victim"},
		{"$SRV.INFO.sessionbus", "$KV.sessions.agent.main.victim"},
	}
	for _, f := range forged {
		m := &nats.Msg{Subject: f.subject, Reply: f.reply, Data: []byte(`{}`), Header: nats.Header{bus.HeaderToken: []string{tok}}}
		if err := callerNC.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	bustest.WaitFor(t, 10*time.Second, "every forged reply refused", func() bool {
		return svc.RefusedReplies() == int64(len(forged))
	})
	// A real request after them still works, and its reply is on the
	// caller's inbox, behind anything the service published before it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := bus.Call(ctx, callerNC, names, tok, "echo", []byte(`{}`)); err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("a request with an inbox reply: %s %v", out, err)
	}
	if err := workerNC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := victimNC.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := landed.Load(); n != 0 {
		t.Fatalf("%d replies were published outside an inbox", n)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("handlers ran %d times; only the request with an inbox reply should run", n)
	}
	if n := obs.refused.Load(); n != int64(len(forged)) {
		t.Fatalf("observer told of %d refused replies, want %d", n, len(forged))
	}
	// the forged tool calls count as 403s on the tool's micro stats
	for _, ep := range svc.Stats().Endpoints {
		if ep.Name == "echo" && (ep.NumErrors != 6 || !strings.HasPrefix(ep.LastError, "403:")) {
			t.Fatalf("echo stats: %d errors, last %q; want the 6 forged calls as 403s", ep.NumErrors, ep.LastError)
		}
	}
}
