package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// The stop benchmark: a running turn stopped through a worker's ops
// subject, two gateways, the turn on whichever took it.

const stopKey = "agent:main:bench:stop"

// stopTurnMs is how long each script turn would run unstopped: far longer
// than any stop takes, so every timed stop finds it running.
const stopTurnMs = 60_000

// stop_latency: per op, a human turn is queued (sb.inbound) and waited
// for until its prompt holds the session (untimed); the span runs from
// the stop request on sb.ops.session.stop to the holding gateway's end of
// the turn, its live "error" event: the stop accepted (the run record
// aborted by the worker's compare-and-set), seen by the gateway through
// its watch of the record, the turn cancelled.
func runStopLatency(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	store, err := sessions.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	if err := ensureSession(cctx, store, stopKey, "main"); err != nil {
		return Result{}, err
	}
	stopGWs, err := e.gateways(ctx, 2, stopTurnMs, gateway.DefaultConcurrency)
	if err != nil {
		return Result{}, err
	}
	defer stopGWs()
	adapter, err := e.op.Mint(bus.Caller{Adapter: inboundChannel}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	ops, err := e.op.Mint(bus.Caller{Adapter: bus.AnyChannel}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	enc := bus.EncodeKey(stopKey)
	ended := make(chan string, 16)
	sub, err := e.nc.Subscribe(e.names.Live(enc), func(m *nats.Msg) {
		var ev bus.LiveEvent
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == bus.LiveError {
			ended <- ev.RunID
		}
	})
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	turn, _ := json.Marshal(map[string]any{"sessionKey": stopKey, "channel": inboundChannel, "from": "u1", "text": "work"})
	stopBody, _ := json.Marshal(map[string]any{"sessionKey": stopKey})
	var replyBytes int
	r, err := measureSpans(ctx, e.sz.send, func() (time.Duration, error) {
		out, err := bus.Inbound(cctx, e.nc, e.names, adapter, turn)
		if err != nil {
			return 0, err
		}
		var acc struct{ Status, RunID string }
		if err := json.Unmarshal(out, &acc); err != nil || acc.Status != "accepted" {
			return 0, fmt.Errorf("inbound reply %.300s (%v), want accepted", out, err)
		}
		if err := waitHolding(cctx, e, enc, acc.RunID); err != nil {
			return 0, err
		}
		t0 := time.Now()
		reply, err := bus.SessionOp(cctx, e.nc, e.names, "stop", ops, stopBody)
		if err != nil {
			return 0, err
		}
		var st struct{ Status, RunID string }
		if err := json.Unmarshal(reply, &st); err != nil || st.Status != "aborted" || st.RunID != acc.RunID {
			return 0, fmt.Errorf("stop reply %.300s (%v), want run %s aborted", reply, err, acc.RunID)
		}
		replyBytes = len(reply)
		for {
			select {
			case id := <-ended:
				if id == acc.RunID {
					return time.Since(t0), nil
				}
			case <-time.After(30 * time.Second):
				return 0, fmt.Errorf("run %s: the gateway never ended the stopped turn", acc.RunID)
			}
		}
	})
	r.Dataset = "sb.ops.session.stop to the holding gateway's end of the turn (live error event), 2 gateways, script turn of 60 s"
	r.ReplyBytes = replyBytes
	return r, err
}

// waitHolding waits until run runID's prompt is the session's newest
// entry: a stop then finds it. (Its running record alone is not enough: the
// prompt follows it, and may move past the previous turn's late reply.)
func waitHolding(ctx context.Context, e *env, enc, runID string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := e.tr.OpenCursor(ctx, enc, true)
		if err != nil {
			return err
		}
		if top, _ := cur.Top(); transcripts.PartHolder(top) == runID {
			return nil
		}
		time.Sleep(time.Millisecond) // polling a state, not a sync: no event says "prompt stored"
	}
	return fmt.Errorf("run %s never held the session", runID)
}
