package handlers

import (
	"context"
	"encoding/json"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// eachArchived offers take the archived sessions (archived: true or
// "all"): the session entries their archives recorded, newest archive
// first, marked archived, through the same filters, visibility and paging
// as live rows (which come first). Read from the archive metadata at each
// call: the live path never pays for it.
func (d *Deps) eachArchived(ctx context.Context, r *requester, q *listQuery, guard rules.Guard, take func(*sessions.Entry) bool) error {
	if d.Lifecycle == nil {
		return nil
	}
	all, err := d.Lifecycle.Archives.List(ctx)
	if err != nil {
		return err
	}
	nowMs := d.Now().UnixMilli()
	for i := len(all) - 1; i >= 0; i-- {
		m := all[i]
		e := &sessions.Entry{Key: m.Key, AgentID: m.AgentID}
		if len(m.Entry) > 0 && json.Unmarshal(m.Entry, e) != nil {
			continue
		}
		e.Key, e.SessionID, e.Archived = m.Key, m.SessionID, true
		if e.UpdatedAt == 0 {
			e.UpdatedAt = m.At
		}
		e.Derived = (*sessions.Derived)(deriveFields(r.alias, e, nil))
		if !d.listable(r, q, e, nowMs) || !archivedVisible(r, e, guard) {
			continue
		}
		if q.fromArchive == nil {
			q.fromArchive = map[*sessions.Entry]bool{}
		}
		q.fromArchive[e] = true
		if !take(e) {
			return nil
		}
	}
	return nil
}

// archivedVisible is the visibility guard for a session that is no longer
// in the index: under tree visibility the requester sees its own archived
// incarnations and its archived children (by the parent they recorded).
func archivedVisible(r *requester, e *sessions.Entry, guard rules.Guard) bool {
	if e.Key == r.key {
		return true
	}
	switch r.visibility {
	case rules.VisibilityAgent, rules.VisibilityAll:
		if r.restrictToSpawned {
			return e.Parent() == r.key
		}
		ok, _, _ := guard.CheckAgent(e.Key, r.derived(e).agentID())
		return ok
	case rules.VisibilityTree:
		return e.Parent() == r.key
	}
	return false
}
