package handlers

import (
	"context"
	"errors"
	"strings"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// resolved is a session reference after resolution (a key, an alias such as
// main or current, or a sessionId: see "Session references" in docs/tools.md).
type resolved struct {
	key          string    // the store key
	k            rules.Key // key, parsed once
	displayKey   string    // what the tool reports back
	viaSessionID bool
	entry        *sessions.Entry // nil when the session has no entry yet
}

// failure is a returned (not thrown) tool error: {status, error}.
type failure = schema.Failure

func fail(status, msg string) *failure { return &failure{Status: status, Error: msg} }

// storeKey maps an internal key onto the store: the alias "main" names the
// requester agent's main session, `agent:<id>:<mainKey>`.
func (r *requester) storeKey(internal string) string {
	return r.alias.StoreKey(internal, r.agentID)
}

// resolveReference turns a sessionKey argument (key, display key, `current`
// or a sessionId) into a store key, the way OpenClaw resolves session
// references.
func (d *Deps) resolveReference(r *requester, raw string) (resolved, *failure) {
	value := strings.TrimSpace(raw)
	if value == rules.KeyCurrent {
		value = r.key
	}
	if rules.ShouldResolveAsSessionID(value) {
		if e := d.Index.Get(value); e != nil && (!r.restrictToSpawned || e.Key == r.key || d.Index.IsChild(r.key, e.Key)) {
			return resolved{key: e.Key, k: rules.ParseKey(e.Key), displayKey: r.alias.Display(e.Key), entry: e}, nil
		}
		if e := d.selectBySessionID(r, value); e != nil {
			return resolved{key: e.Key, k: rules.ParseKey(e.Key), displayKey: r.alias.Display(e.Key), viaSessionID: true, entry: e}, nil
		}
		if r.restrictToSpawned {
			return resolved{}, fail(rules.StatusForbidden, rules.SandboxNotVisibleError(value))
		}
		return resolved{}, fail("error", "Session not found: "+value+" (use the full sessionKey from sessions_list)")
	}
	internal := r.alias.Internal(value, r.key)
	key := r.storeKey(internal)
	return resolved{key: key, k: rules.ParseKey(key), displayKey: r.alias.Display(internal), entry: d.Index.Get(key)}, nil
}

// checkSandboxSpawned is the sandbox rule: a spawned-restricted sandbox may only address
// itself and its own children by key.
func (d *Deps) checkSandboxSpawned(r *requester, res resolved, input string) *failure {
	if !r.restrictToSpawned || res.viaSessionID || res.key == r.key {
		return nil
	}
	if d.Index.IsChild(r.key, res.key) {
		return nil
	}
	return fail(rules.StatusForbidden, rules.SandboxNotVisibleError(strings.TrimSpace(input)))
}

// selectBySessionID applies the gateway's choice among store keys sharing a
// sessionId: collapse alias duplicates, prefer structural matches, then the
// unique freshest; a tie is ambiguous and resolves to nothing.
func (d *Deps) selectBySessionID(r *requester, id string) *sessions.Entry {
	return d.selectSessionID(r, id, nil)
}

// selectSessionID is selectBySessionID among the entries keep accepts (nil:
// all), so a tool can narrow the candidates before the choice is made.
func (d *Deps) selectSessionID(r *requester, id string, keep func(*sessions.Entry) bool) *sessions.Entry {
	var cands []*sessions.Entry
	for _, e := range d.Index.BySessionID(id) {
		if keep != nil && !keep(e) {
			continue
		}
		if r.restrictToSpawned {
			if e.Key == rules.KeyGlobal || e.Key == rules.KeyUnknown || !d.Index.IsChild(r.key, e.Key) {
				continue
			}
		}
		cands = append(cands, e)
	}
	cands = collapseAliases(cands)
	if len(cands) <= 1 {
		if len(cands) == 1 {
			return cands[0]
		}
		return nil
	}
	var structural []*sessions.Entry
	for _, e := range cands {
		if strings.HasSuffix(strings.ToLower(e.Key), ":"+strings.ToLower(id)) {
			structural = append(structural, e)
		}
	}
	if len(structural) > 0 {
		return uniqueFreshest(structural)
	}
	return uniqueFreshest(cands)
}

// collapseAliases keeps one entry per request key (the key without its
// `agent:<id>:` prefix, case-folded): the freshest, then the one already in
// lower case, then the lexicographically first.
func collapseAliases(es []*sessions.Entry) []*sessions.Entry {
	best := map[string]*sessions.Entry{}
	var order []string
	for _, e := range es {
		rk := requestKey(e.Key)
		cur, ok := best[rk]
		if !ok {
			order = append(order, rk)
			best[rk] = e
			continue
		}
		if betterAlias(e, cur) {
			best[rk] = e
		}
	}
	out := make([]*sessions.Entry, 0, len(order))
	for _, rk := range order {
		out = append(out, best[rk])
	}
	return out
}

func requestKey(k string) string {
	if _, rest, ok := rules.ParseAgentSessionKey(k); ok {
		return rest
	}
	return strings.ToLower(strings.TrimSpace(k))
}

func betterAlias(a, b *sessions.Entry) bool {
	if a.UpdatedAt != b.UpdatedAt {
		return a.UpdatedAt > b.UpdatedAt
	}
	al, bl := a.Key == strings.ToLower(a.Key), b.Key == strings.ToLower(b.Key)
	if al != bl {
		return al
	}
	return a.Key < b.Key
}

func uniqueFreshest(es []*sessions.Entry) *sessions.Entry {
	var best *sessions.Entry
	tie := false
	for _, e := range es {
		switch {
		case best == nil || e.UpdatedAt > best.UpdatedAt:
			best, tie = e, false
		case e.UpdatedAt == best.UpdatedAt:
			tie = true
		}
	}
	if tie {
		return nil
	}
	return best
}

// resolveVisible resolves a reference and applies the sandbox and visibility
// checks of one action. The index is read without a barrier; only when that
// read denies or misses does it sync and decide again, so a session written
// a moment ago through another worker is never refused for index lag.
func (d *Deps) resolveVisible(ctx context.Context, r *requester, ref string, a rules.Action) (resolved, *failure) {
	type outcome struct {
		res resolved
		f   *failure
	}
	o, _ := decideSynced(ctx, d, func() (outcome, error) {
		res, f := d.checkVisible(r, ref, a)
		if f != nil {
			return outcome{res, f}, errRefused
		}
		return outcome{res, nil}, nil
	})
	return o.res, o.f
}

// errRefused marks a returned-error decision for decideSynced.
var errRefused = errors.New("refused")

// decideSynced runs decide on the index as it is; when decide refuses
// (a miss or a denial), it syncs the index and decides again, so a
// session written a moment ago through another worker is never refused
// for index lag while the common case pays no barrier.
func decideSynced[T any](ctx context.Context, d *Deps, decide func() (T, error)) (T, error) {
	v, err := decide()
	if err == nil {
		return v, nil
	}
	if serr := d.Index.Sync(ctx); serr != nil {
		d.Log.Warn("session index sync", "err", serr)
		return v, err
	}
	return decide()
}

func (d *Deps) checkVisible(r *requester, ref string, a rules.Action) (resolved, *failure) {
	res, f := d.resolveReference(r, ref)
	if f != nil {
		return res, f
	}
	if f := d.checkSandboxSpawned(r, res, ref); f != nil {
		return res, f
	}
	if ok, status, msg := d.guard(r, a).CheckAgent(res.key, res.k.AgentID); !ok {
		return res, fail(status, msg)
	}
	return res, nil
}
