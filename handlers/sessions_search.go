package handlers

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// sessions_search limits: the transcript index's own (ops/search), checked
// here first so a bad call costs no request and its error names the
// tool's parameters.
const (
	searchMaxResults = 25
	searchMaxQuery   = 512
	searchMaxOffset  = 10000
	searchMaxKeys    = 1000 // the index's bound on a sessionKeys or agents filter
)

type (
	searchHit    = schema.SearchHit
	searchResult = schema.SessionsSearchResult
)

// sessionsSearch finds transcript entries by their words, in the sessions
// the caller may see. The scope is worked out from the visibility before
// anything is read, and the index is asked for that scope only; each hit
// is checked again against the session index before it is returned.
func sessionsSearch(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	query, err := p.RequiredString("query")
	if err != nil {
		return nil, err
	}
	if err := checkSearchQuery(query); err != nil {
		return nil, err
	}
	limit, hasLimit, err := p.PositiveInt("limit")
	if err != nil {
		return nil, err
	}
	if !hasLimit {
		limit = searchMaxResults
	}
	if limit > searchMaxResults {
		return nil, badRequest("limit must be at most 25")
	}
	offset, _, err := p.NonNegativeInt("offset")
	if err != nil {
		return nil, err
	}
	if offset > searchMaxOffset {
		return nil, badRequest("offset must be at most 10000: narrow the search with more words or a sessionKey instead")
	}
	ref, hasRef, err := p.String("sessionKey")
	if err != nil {
		return nil, err
	}
	scope := searchScope{}
	if hasRef {
		if err := rules.ValidateSessionKeyInput(ref); err != nil {
			return nil, err
		}
		res, f := d.resolveVisible(ctx, r, ref, rules.ActionHistory)
		if f != nil {
			return d.redactResult(f) // it quotes the caller's key
		}
		scope.keys = []string{res.key}
	} else {
		scope = d.searchScope(r)
	}
	ans, err := d.askSearch(ctx, searchRequest{Query: query, Limit: limit, Offset: offset, SessionKeys: scope.keys, Agents: scope.agents})
	if err != nil {
		return nil, err
	}
	return d.searchHits(r, ans, offset), nil
}

// checkSearchQuery refuses what the index would: it matches words only,
// and at most searchMaxQuery characters of them.
func checkSearchQuery(q string) error {
	if n := utf8.RuneCountInString(q); n > searchMaxQuery {
		return badRequest("query must not exceed 512 characters: search for a shorter phrase")
	}
	if !strings.ContainsFunc(q, func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) }) {
		return badRequest("query has no letter or digit: only words are indexed")
	}
	return nil
}

// searchScope is what the index is asked for: the keys of the sessions a
// caller may see, when their set is small (self, tree, a sandbox's
// spawned children, one named session), else the agents whose sessions
// it may see; neither means every session.
type searchScope struct {
	keys   []string
	agents []string
}

// searchScope applies tools.sessions.visibility, the sandbox clamp and
// tools.agentToAgent as sessions_list does, before the index is asked.
func (d *Deps) searchScope(r *requester) searchScope {
	if r.restrictToSpawned || r.visibility == rules.VisibilitySelf || r.visibility == rules.VisibilityTree {
		// the caller's own session first (a sandbox may read it, as
		// sessions_history may), then its children newest first; beyond
		// the index's bound the oldest children are left out
		keys := []string{r.key}
		guard := d.guard(r, rules.ActionHistory)
		for _, e := range d.listCandidates(r) {
			if len(keys) == searchMaxKeys {
				break
			}
			if e.Key == r.key {
				continue
			}
			if ok, _, _ := guard.CheckAgent(e.Key, r.derived(e).agentID()); ok {
				keys = append(keys, e.Key)
			}
		}
		return searchScope{keys: keys}
	}
	own := r.k.AgentID
	if r.visibility == rules.VisibilityAgent || !r.a2a.Enabled {
		return searchScope{agents: []string{own}}
	}
	if len(r.a2a.Allow) == 0 {
		return searchScope{} // every agent may reach every other
	}
	// an allow list: the agents it admits, among those that have sessions
	agents := []string{own}
	seen := map[string]bool{own: true} // each agent's patterns matched once
	d.Index.Each(func(e *sessions.Entry) bool {
		a := rules.AgentIDFromKey(e.Key)
		if !seen[a] {
			seen[a] = true
			if r.a2a.IsAllowed(own, a) {
				agents = append(agents, a)
			}
		}
		return len(agents) < searchMaxKeys
	})
	return searchScope{agents: agents}
}

// searchHits turns the index's answer into the tool's result. Each hit
// must still be a session the caller may list (its entry in the session
// index, the guard): the scope already asked for no other, and a session
// deleted a moment ago, or one sessions_list leaves out (a cron run), is
// dropped here.
func (d *Deps) searchHits(r *requester, ans *searchAnswer, offset int) *searchResult {
	guard := d.guard(r, rules.ActionHistory)
	nowMs := d.Now().UnixMilli()
	res := &searchResult{Results: []searchHit{}, HasMore: ans.More, Indexing: ans.Index.Lag > 0}
	for _, h := range ans.Results {
		e := d.Index.Get(h.SessionKey)
		if e == nil || e.Key != h.SessionKey || !d.listable(r, &listQuery{}, e, nowMs) {
			continue
		}
		if ok, _, _ := guard.CheckAgent(e.Key, r.derived(e).agentID()); !ok {
			d.Log.Warn("sessions_search: the index answered a hit outside the caller's scope; dropped", "requester", r.key, "session", e.Key)
			continue
		}
		snippet, _ := d.Redactor.ToolPayload(h.Snippet)
		res.Results = append(res.Results, searchHit{SessionKey: r.alias.Display(e.Key), SessionID: e.SessionID,
			Seq: h.Entry, Role: h.Role, Timestamp: h.Timestamp, Snippet: snippet})
	}
	res.Count = len(res.Results)
	if ans.More {
		next := offset + len(ans.Results)
		res.NextOffset = &next
	}
	return res
}
