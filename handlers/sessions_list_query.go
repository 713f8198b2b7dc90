package handlers

import (
	"strings"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// sessions_list's query: its parameters read and checked (parseListQuery),
// and the filters they set applied to one entry (listable).

// validKinds are the kinds the kinds filter takes; others are ignored.
var validKinds = map[string]bool{"main": true, "group": true, "cron": true, "hook": true, "node": true, "other": true}

// listQuery is the validated sessions_list parameters.
type listQuery struct {
	kinds            map[string]bool
	limit, offset    int
	activeMinutes    int
	messageLimit     int
	label, agentID   string
	search           string
	archived         string // "false" | "true" | "all"
	pinned           *bool
	group            string
	exact            []exactFilter // ownerId, creatorId, projectId, workspaceDir
	excludeSubagents bool
	derivedTitles    bool
	lastMessage      bool
	// fromArchive marks the rows made from archive metadata (archived:
	// true or "all"): not enriched from the live transcripts
	fromArchive map[*sessions.Entry]bool
}

// parseListQuery reads sessions_list's parameters; a bad one is thrown.
func parseListQuery(p rules.Params) (*listQuery, error) {
	q := &listQuery{limit: listDefaultLimit, archived: "false"}
	kinds, _, err := p.StringList("kinds")
	if err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if k = strings.ToLower(strings.TrimSpace(k)); validKinds[k] {
			if q.kinds == nil {
				q.kinds = map[string]bool{}
			}
			q.kinds[k] = true
		}
	}
	if v, ok, err := p.PositiveInt("limit"); err != nil {
		return nil, err
	} else if ok {
		q.limit = v
	}
	if v, ok, err := p.NonNegativeInt("offset"); err != nil {
		return nil, err
	} else if ok {
		q.offset = v
	}
	if q.activeMinutes, _, err = p.PositiveInt("activeMinutes"); err != nil {
		return nil, err
	}
	if q.messageLimit, _, err = p.NonNegativeInt("messageLimit"); err != nil {
		return nil, err
	}
	q.messageLimit = min(q.messageLimit, listMaxMessages)
	if q.label, _, err = p.String("label"); err != nil {
		return nil, err
	}
	if q.agentID, _, err = p.AgentID("agentId"); err != nil {
		return nil, err
	}
	if q.search, _, err = p.String("search"); err != nil {
		return nil, err
	}
	q.search = sessions.SearchNeedle(q.search)
	if q.group, _, err = p.String("group"); err != nil {
		return nil, err
	}
	for _, f := range exactFilters {
		v, ok, err := p.String(f.name)
		if err != nil {
			return nil, err
		}
		if ok {
			q.exact = append(q.exact, exactFilter{field: f.field, value: v})
		}
	}
	if err := parseArchived(p, q); err != nil {
		return nil, err
	}
	if v, ok, err := p.Bool("pinned"); err != nil {
		return nil, err
	} else if ok {
		q.pinned = &v
	}
	if q.excludeSubagents, _, err = p.Bool("excludeSubagents"); err != nil {
		return nil, err
	}
	if q.derivedTitles, _, err = p.Bool("includeDerivedTitles"); err != nil {
		return nil, err
	}
	if q.lastMessage, _, err = p.Bool("includeLastMessage"); err != nil {
		return nil, err
	}
	if rel, ok, err := p.String("relationship"); err != nil {
		return nil, err
	} else if ok {
		switch rel {
		case "owned", "created", "involving":
			// sessionbus callers are sessions, never authenticated people.
			return nil, badRequest("relationship requires an authenticated requesting user; use an explicit ownerId or creatorId instead")
		default:
			return nil, badRequest("relationship must be owned, created, or involving")
		}
	}
	if v, _, err := p.Bool("activeOnly"); err != nil {
		return nil, err
	} else if v {
		return nil, badRequest("activeOnly requires a Gateway-backed inventory with live run state")
	}
	return q, nil
}

// exactFilter is one of the sessions_list filters that match an entry
// field exactly.
type exactFilter struct {
	field func(*sessions.Entry) string
	value string
}

var exactFilters = []struct {
	name  string
	field func(*sessions.Entry) string
}{
	{"ownerId", func(e *sessions.Entry) string { return e.OwnerID() }},
	{"creatorId", func(e *sessions.Entry) string { return e.CreatorID() }},
	{"projectId", func(e *sessions.Entry) string { return e.ProjectID() }},
	{"workspaceDir", func(e *sessions.Entry) string { return e.WorkspaceDir() }},
}

func parseArchived(p rules.Params, q *listQuery) error {
	raw, ok := p["archived"]
	if !ok || raw == nil {
		return nil
	}
	switch v := raw.(type) {
	case bool:
		if v {
			q.archived = "true"
		}
		return nil
	case string:
		if strings.TrimSpace(v) == "all" {
			q.archived = "all"
			return nil
		}
	}
	return badRequest(`archived must be true, false or "all"`)
}

// listable applies the inventory filters. It runs under the index lock, so
// it must not call back into the index.
func (d *Deps) listable(r *requester, q *listQuery, e *sessions.Entry, nowMs int64) bool {
	k, f := e.Key, r.derived(e)
	switch {
	case k == rules.KeyUnknown, f.CronRun, f.Malformed:
		return false
	case k == rules.KeyGlobal && (r.alias.Alias != rules.KeyGlobal || r.restrictToSpawned):
		return false
	}
	switch q.archived {
	case "false":
		if e.Archived {
			return false
		}
	case "true":
		if !e.Archived {
			return false
		}
	}
	if q.pinned != nil && e.Pinned != *q.pinned {
		return false
	}
	if q.label != "" && e.Label != q.label {
		return false
	}
	if q.agentID != "" && f.agentID() != q.agentID {
		return false
	}
	if q.group != "" && e.Group != q.group {
		return false
	}
	for _, x := range q.exact {
		if x.field(e) != x.value {
			return false
		}
	}
	if q.excludeSubagents && f.Subagent {
		return false
	}
	if q.activeMinutes > 0 && e.UpdatedAt < nowMs-int64(q.activeMinutes)*60_000 {
		return false
	}
	if q.search != "" && !e.MatchesSearch(q.search) {
		return false
	}
	if q.kinds != nil && !q.kinds[f.kind()] {
		return false
	}
	return true
}
