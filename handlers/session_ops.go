package handlers

import (
	"context"
	"errors"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// SessionOps are the operations on one session, on
// <prefix>.ops.session.<op> (docs/ops.md): ops and channel adapters delete
// or reset a session, {"sessionKey": KEY}, the transcript archived first
// (package lifecycle), set or clear its goal, compact it (a gateway runs
// the compaction), read its effective tool list (tools), and set its
// send-policy override (send-policy), pin or unpin it (pin), stop its running turn (stop), and
// set its queue mode (queue: queue_command.go). They are no agent
// tools. An adapter token for one channel may act only on that channel's
// sessions; ops mint one for '*'.
func (d *Deps) SessionOps() map[string]bus.Handler {
	op := func(run func(ctx context.Context, req *bus.Request, key string, p rules.Params) (any, error)) bus.Handler {
		return bus.HandlerFunc(func(ctx context.Context, req *bus.Request) (any, error) {
			p, err := rules.ParseParams(req.Body)
			if err != nil {
				return nil, bus.Thrown(err)
			}
			key, err := p.RequiredString("sessionKey")
			if err != nil {
				return nil, bus.Thrown(err)
			}
			if err := rules.ValidateSessionKeyInput(key); err != nil {
				return nil, bus.Thrown(err)
			}
			if req.Caller.Adapter != bus.AnyChannel {
				e, _, err := d.Store.Get(ctx, key)
				if errors.Is(err, sessions.ErrNotFound) {
					return run(ctx, req, key, p) // refused there, with the one message
				}
				if err != nil {
					return nil, err
				}
				if ch := sessionChannel(e); !req.Caller.AllowsChannel(ch) {
					return nil, bus.Errorf(bus.CodeForbidden,
						"this adapter token is for channel %q and session %s is on channel %q: only that channel's adapter, or an ops token (`sessionbus token --adapter '*'`), may change it",
						req.Caller.Adapter, key, ch)
				}
			}
			return run(ctx, req, key, p)
		})
	}
	ops := map[string]bus.Handler{"goal": op(func(ctx context.Context, req *bus.Request, key string, p rules.Params) (any, error) {
		res, err := d.goalOp(ctx, req, key, p)
		return res, bus.Thrown(err)
	}), "tools": op(func(ctx context.Context, _ *bus.Request, key string, _ rules.Params) (any, error) {
		res, err := d.effectiveTools(ctx, key, "")
		return res, bus.Thrown(err)
	}), "send-policy": op(func(ctx context.Context, _ *bus.Request, key string, p rules.Params) (any, error) {
		word, err := p.RequiredString("sendPolicy")
		if err != nil {
			return nil, bus.Thrown(err)
		}
		res, err := d.setSendOverride(ctx, key, word)
		return res, bus.Thrown(err)
	})}
	ops["stop"] = op(func(ctx context.Context, _ *bus.Request, key string, _ rules.Params) (any, error) {
		res, err := d.StopSession(ctx, key)
		return res, bus.Thrown(err)
	})
	ops["queue"] = op(func(ctx context.Context, _ *bus.Request, key string, p rules.Params) (any, error) {
		return d.queueOp(ctx, key, p)
	})
	ops["compact"] = op(func(ctx context.Context, _ *bus.Request, key string, p rules.Params) (any, error) {
		return d.compactOp(ctx, key, p)
	})
	ops["pin"] = op(func(ctx context.Context, _ *bus.Request, key string, p rules.Params) (any, error) {
		res, err := d.pinOp(ctx, key, p)
		return res, bus.Thrown(err)
	})
	if d.Lifecycle != nil {
		ops["delete"] = op(func(ctx context.Context, _ *bus.Request, key string, _ rules.Params) (any, error) {
			return d.Lifecycle.Delete(ctx, key, archives.ReasonDeleted, nil)
		})
		ops["reset"] = op(func(ctx context.Context, _ *bus.Request, key string, _ rules.Params) (any, error) {
			return d.Lifecycle.Reset(ctx, key, nil)
		})
	}
	return ops
}

// sessionChannel is the channel a session talks on, as its entry records it.
func sessionChannel(e *sessions.Entry) string {
	switch {
	case e.DeliveryContext != nil && e.DeliveryContext.Channel != "":
		return e.DeliveryContext.Channel
	case e.LastChannel != "":
		return e.LastChannel
	case e.Origin != nil && e.Origin.Provider != "":
		return e.Origin.Provider
	}
	return e.Channel
}
