package handlers

import (
	"context"

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
	e, status, err := d.setEntry(ctx, key, func(x *sessions.Entry) bool {
		if x.Pinned == pinned {
			return false
		}
		x.Pinned = pinned
		return true
	})
	if err != nil {
		return nil, err
	}
	return &pinResult{Status: status, SessionKey: key, Pinned: e.Pinned}, nil
}
