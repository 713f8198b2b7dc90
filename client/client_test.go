package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

const mainKey = "agent:main:main"

func TestTypedCallsAndRefusals(t *testing.T) {
	s := handlerstest.Start(t, nil)
	c := New(s.Conn, Minted(s.Operator, bus.Caller{SessionKey: mainKey}, 0))
	ctx := bustest.Context(t)
	agents, err := c.AgentsList(ctx)
	if err != nil || agents.Requester != "main" {
		t.Fatalf("agents_list: %+v %v", agents, err)
	}
	spawned, err := c.SessionsSpawn(ctx, schema.SessionsSpawnParams{Task: "t", Label: "kid"})
	if err != nil || spawned.Status != "accepted" {
		t.Fatalf("spawn: %+v %v", spawned, err)
	}
	subs, err := c.SubagentsList(ctx, 0)
	if err != nil || subs.Total != 1 || len(subs.Active)+len(subs.Recent) != 1 {
		t.Fatalf("subagents list: %+v %v", subs, err)
	}
	if _, err := c.SessionsHistory(ctx, schema.SessionsHistoryParams{SessionKey: "nope"}); !isRefusal(err) {
		t.Errorf("sessions_history of an unknown session: %v, want a *Refusal", err)
	}
	if _, err := c.SessionsHistory(ctx, schema.SessionsHistoryParams{SessionKey: mainKey}); err != nil {
		t.Errorf("sessions_history of the caller: %v", err)
	}
	y, err := c.SessionsYield(ctx, schema.SessionsYieldParams{})
	if err != nil || y.Status != "error" || y.Error != "Yield not supported in this context" {
		t.Errorf("yield without a run: %+v %v", y, err)
	}
	// a sub-agent leaf may not list: thrown 403, not a refusal
	leaf := New(s.Conn, Minted(s.Operator, bus.Caller{SessionKey: "agent:main:subagent:x"}, 0))
	_, err = leaf.SessionsList(ctx, schema.SessionsListParams{})
	if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeForbidden {
		t.Errorf("leaf sessions_list: %v, want 403", err)
	}
}

func isRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// With retries, a call made before any worker runs succeeds once one
// starts; sends and spawns get an idempotency key so a retry is safe.
func TestRetriesUntilAWorkerAnswers(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Worker.Stop() // the server stays; no worker answers now
	c := New(s.Conn, Minted(s.Operator, bus.Caller{SessionKey: mainKey}, 0))
	if _, err := c.SessionsList(bustest.Context(t), schema.SessionsListParams{}); err == nil {
		t.Fatal("no worker, no retries: the call succeeded")
	} else if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeUnavailable {
		t.Fatalf("no worker: %v, want 503", err)
	}

	counted := &countingTokens{TokenSource: Minted(s.Operator, bus.Caller{SessionKey: mainKey}, 0)}
	retrying := New(s.Conn, counted, WithRetries(1000))
	done := make(chan error, 1)
	go func() {
		_, err := retrying.SessionsList(bustest.Context(t), schema.SessionsListParams{})
		done <- err
	}()
	// a second attempt means the first found no worker
	bustest.WaitFor(t, 10*time.Second, "a retry", func() bool { return counted.n.Load() >= 2 })
	w, err := handlers.StartWorker(bustest.Context(t), s.Conn, s.Config, bus.NewVerifier(s.Operator.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := <-done; err != nil {
		t.Fatalf("retried call: %v", err)
	}
}

type countingTokens struct {
	TokenSource
	n atomic.Int32
}

func (c *countingTokens) Token(ctx context.Context) (string, error) {
	c.n.Add(1)
	return c.TokenSource.Token(ctx)
}

// With retries on, a send without a key gets one, the same for each retry
// of that call: here the key generator is fixed, so two sends share it and
// the second returns the first's run.
func TestRetriesGiveSendsAnIdempotencyKey(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:discord:group:1"}, `{"role":"user","content":"x"}`)
	noWait := 0
	p := schema.SessionsSendParams{SessionKey: mainKey, Message: "m", TimeoutSeconds: &noWait}
	runIDs := func(c *Client) (string, string) {
		ctx := bustest.Context(t)
		a, err := c.SessionsSend(ctx, p)
		if err != nil || a.Status != "accepted" {
			t.Fatalf("send: %+v %v", a, err)
		}
		b, err := c.SessionsSend(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return a.RunID, b.RunID
	}
	plain := New(s.Conn, Minted(s.Operator, bus.Caller{SessionKey: mainKey}, 0))
	if a, b := runIDs(plain); a == b {
		t.Errorf("without retries two sends share run %s", a)
	}
	keyed := New(s.Conn, Minted(s.Operator, bus.Caller{SessionKey: mainKey}, 0), WithRetries(2))
	keyed.newKey = func() string { return "fixed-key" }
	if a, b := runIDs(keyed); a != b {
		t.Errorf("the same generated key gave runs %s and %s", a, b)
	}
}

// A minted token is reused while young and minted anew after half its
// life, so a long-lived client never sends an expired one.
func TestMintedTokenRenews(t *testing.T) {
	op := bustest.Operator(t)
	now := time.Unix(1_000_000, 0)
	m := Minted(op, bus.Caller{SessionKey: mainKey}, time.Minute).(*minted)
	m.now = func() time.Time { return now }
	// (two tokens minted within one second are the same bytes: the
	// renewal shows in when the next one is due)
	m.Token(context.Background())
	first := m.renewAt
	now = now.Add(29 * time.Second)
	m.Token(context.Background())
	if m.renewAt != first {
		t.Error("a young token was minted anew")
	}
	now = now.Add(2 * time.Second)
	c, _ := m.Token(context.Background())
	if !m.renewAt.Equal(now.Add(30 * time.Second)) {
		t.Error("a token past half its life was reused")
	}
	if _, err := bus.NewVerifier(op.PublicKey()).Verify(c); err != nil {
		t.Errorf("renewed token does not verify: %v", err)
	}
}
