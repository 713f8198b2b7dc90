package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// pinResult is the answer of <prefix>.ops.session.pin.
type pinResult struct {
	Status     string `json:"status"` // set | unchanged
	SessionKey string `json:"sessionKey"`
	Pinned     bool   `json:"pinned"`
}

// pinOp is <prefix>.ops.session.pin: {"sessionKey", "pinned": bool}. It
// sets the entry's pinned flag (OpenClaw's field), which sessions_list
// orders first and filters on, and which maintenance never prunes. An
// unchanged flag writes nothing; an unknown session is refused.
func (d *Deps) pinOp(ctx context.Context, key string, p rules.Params) (any, error) {
	pinned, ok, err := p.Bool("pinned")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest(`pinned required: true pins the session, false unpins it`)
	}
	status := "set"
	e, _, err := d.Store.Update(ctx, key, func(x *sessions.Entry) error {
		if x.Pinned == pinned {
			status = "unchanged"
			return record.ErrUnchanged
		}
		x.Pinned = pinned
		return nil
	})
	if errors.Is(err, record.ErrUnchanged) {
		e, _, err = d.Store.Get(ctx, key)
	}
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound, "unknown session %s: check the key (sessions_list shows them)", key)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	return &pinResult{Status: status, SessionKey: key, Pinned: e.Pinned}, nil
}
