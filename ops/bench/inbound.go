package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The ingress benchmark: a human turn from a channel
// adapter, measured from the request on sb.inbound to its reply arriving on
// sb.deliver.<channel>, one gateway, script runtime (echo).

const (
	inboundKey     = "agent:main:bench:human"
	inboundChannel = "bench"
)

// inbound_turn: sequential turns into one session, each not waited on by
// the ingress (accepted at once); the clock stops when the delivery of
// that run arrives on a core subscription of sb.deliver.bench.
func runInboundTurn(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	store, err := sessions.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	if err := ensureSession(cctx, store, inboundKey, "main"); err != nil {
		return Result{}, err
	}
	stop, err := e.gateways(ctx, 1, 0, gateway.DefaultConcurrency)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	token, err := e.op.Mint(bus.Caller{Adapter: inboundChannel}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	sub, err := e.nc.SubscribeSync(e.names.Deliver(inboundChannel))
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, _ := json.Marshal(map[string]any{"sessionKey": inboundKey, "channel": inboundChannel, "from": "u1", "text": "ping"})
	var replyBytes int
	r, err := measure(ctx, e.sz.send, func() error {
		out, err := bus.Inbound(cctx, e.nc, e.names, token, body)
		if err != nil {
			return err
		}
		var acc struct{ Status, RunID string }
		if err := json.Unmarshal(out, &acc); err != nil || acc.Status != "accepted" {
			return fmt.Errorf("inbound reply %.300s (%v), want accepted", out, err)
		}
		replyBytes = len(out)
		for {
			m, err := sub.NextMsg(30 * time.Second)
			if err != nil {
				return fmt.Errorf("delivery of run %s: %w", acc.RunID, err)
			}
			var d struct{ RunID, Message string }
			if err := json.Unmarshal(m.Data, &d); err != nil {
				return err
			}
			if d.RunID != acc.RunID {
				continue // not this run's (each turn is waited for, so none is expected)
			}
			if d.Message != "ping" {
				return fmt.Errorf("delivery %q, want the echo %q", d.Message, "ping")
			}
			return nil
		}
	})
	r.Dataset = "sb.inbound (accepted at once) to the reply on sb.deliver.bench, 1 session, 1 gateway, script echo"
	r.ReplyBytes = replyBytes
	return r, err
}

// inbound_routed: a routed first message, each from a new peer, so each
// request routes (session.dmScope per-channel-peer), creates the session
// (a KV create) and queues its turn (run record and SB_RUNS): measured from
// the request on sb.inbound to its "accepted" reply. No gateway runs: the
// row prices the ingress, not the turn (inbound_turn does).
func runInboundRouted(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	token, err := e.op.Mint(bus.Caller{Adapter: inboundChannel}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	n := 0
	var replyBytes int
	r, err := measure(ctx, e.sz.send, func() error {
		n++
		from := fmt.Sprintf("peer-%d-%d", time.Now().UnixNano(), n)
		body, _ := json.Marshal(map[string]any{"channel": inboundChannel, "from": from, "text": "ping"})
		out, err := bus.Inbound(cctx, e.nc, e.names, token, body)
		if err != nil {
			return err
		}
		var acc struct {
			Status, SessionKey string
			Created            bool
		}
		if err := json.Unmarshal(out, &acc); err != nil || acc.Status != "accepted" || !acc.Created ||
			acc.SessionKey != "agent:main:"+inboundChannel+":direct:"+from {
			return fmt.Errorf("inbound reply %.300s (%v), want accepted into a new session", out, err)
		}
		replyBytes = len(out)
		return nil
	})
	r.Dataset = "a routed first message from a new peer (dmScope per-channel-peer) on sb.inbound to its accepted reply: route, session created, turn queued; no gateway"
	r.ReplyBytes = replyBytes
	return r, err
}

// ensureSession creates an empty session key of agent, unless it exists
// (a rerun on the same data).
func ensureSession(ctx context.Context, store *sessions.Store, key, agent string) error {
	now := time.Now().UnixMilli()
	_, err := store.Create(ctx, &sessions.Entry{Key: key, AgentID: agent, SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	if errors.Is(err, sessions.ErrExists) {
		return nil
	}
	return err
}
