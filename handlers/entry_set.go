package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// setEntry writes key's entry through change, which reports whether it
// changed anything: status "set", or "unchanged" with nothing written.
// It returns the entry as stored; an unknown session is a 404.
func (d *Deps) setEntry(ctx context.Context, key string, change func(*sessions.Entry) bool) (*sessions.Entry, string, error) {
	status := "set"
	e, _, err := d.Store.Update(ctx, key, func(x *sessions.Entry) error {
		if !change(x) {
			status = "unchanged"
			return record.ErrUnchanged
		}
		status = "set"
		return nil
	})
	if errors.Is(err, record.ErrUnchanged) {
		e, _, err = d.Store.Get(ctx, key)
	}
	return e, status, entryErr(key, err)
}

// entryErr is err as a tool answers it: an unknown session is a 404 that
// says where the keys are listed.
func entryErr(key string, err error) error {
	if errors.Is(err, sessions.ErrNotFound) {
		return bus.Errorf(bus.CodeNotFound, "unknown session %s: check the key (sessions_list shows them)", key)
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", key, err)
	}
	return nil
}
