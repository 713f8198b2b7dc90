package console

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// The sessions page: one page of rows from the console's index of the
// sessions bucket (kept by a KV watch), filtered as sessions_list filters,
// sessions with a run in flight first, then the most recently updated.
// Only the page asked for is encoded: a browser never holds the whole list.

const (
	pageDefault = 50
	pageMax     = 200
)

// Row is one session as the sessions page shows it.
type Row struct {
	Key          string `json:"key"`
	Kind         string `json:"kind"`
	AgentID      string `json:"agentId"`
	Label        string `json:"label,omitempty"`
	DisplayName  string `json:"displayName,omitempty"`
	Channel      string `json:"channel,omitempty"`
	Model        string `json:"model,omitempty"`
	SpawnedBy    string `json:"spawnedBy,omitempty"`
	UpdatedAt    int64  `json:"updatedAt"`
	TotalTokens  int64  `json:"totalTokens"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	Status       string `json:"status,omitempty"`
	Active       bool   `json:"active"`
	Archived     bool   `json:"archived,omitempty"`
	Goal         string `json:"goal,omitempty"`
	Children     int    `json:"children,omitempty"`
	// Preview is the newest message with text, one redacted line;
	// PreviewRole says whose (user or assistant).
	Preview     string `json:"preview,omitempty"`
	PreviewRole string `json:"previewRole,omitempty"`
	PreviewAt   int64  `json:"previewAt,omitempty"`
	// Waiting says a person is waited on: the agent replied last to a
	// person's message and nothing runs (see waiting).
	Waiting bool `json:"waiting,omitempty"`
}

// Page is one page of the list.
type Page struct {
	Rows   []Row `json:"rows"`
	Offset int   `json:"offset"`
	Limit  int   `json:"limit"`
	// Total is the number of matching sessions, or with Estimated the
	// number of sessions (no narrowing filter: the walk stopped at the
	// page's end). More says a next page exists.
	Total     int  `json:"total"`
	Estimated bool `json:"estimated,omitempty"`
	More      bool `json:"more"`
}

// Filter is the sessions_list filters the page offers.
type Filter struct {
	Kinds         map[string]bool
	AgentID       string
	Label         string
	Search        string
	ActiveMinutes int
	Archived      string // "false" (default), "true", "all"
	Waiting       bool   // only sessions waiting on a person
}

// narrow reports a filter that leaves out more than archived sessions:
// the list then counts its matches. Otherwise nearly every session matches
// and the walk stops at the page's end.
func (f Filter) narrow() bool {
	return f.Waiting || len(f.Kinds) > 0 || f.AgentID != "" || f.Label != "" || f.Search != "" || f.ActiveMinutes > 0 || f.Archived == "true"
}

var alias = rules.ResolveAlias("main", "")

func (f Filter) match(e *sessions.Entry, now int64) bool {
	if f.AgentID != "" && agentOf(e) != f.AgentID {
		return false
	}
	if f.Label != "" && e.Label != f.Label {
		return false
	}
	switch f.Archived {
	case "true":
		if !e.Archived {
			return false
		}
	case "all":
	default:
		if e.Archived {
			return false
		}
	}
	if f.ActiveMinutes > 0 && e.UpdatedAt < now-int64(f.ActiveMinutes)*60_000 {
		return false
	}
	if len(f.Kinds) > 0 && !f.Kinds[rules.Kind(e.Key, alias, e.ChatType)] {
		return false
	}
	return f.Search == "" || e.MatchesSearch(f.Search)
}

func agentOf(e *sessions.Entry) string {
	if e.AgentID != "" {
		return e.AgentID
	}
	return rules.AgentIDFromKey(e.Key)
}

// ParseFilter reads the filters from a query string.
func ParseFilter(q map[string][]string) Filter {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	f := Filter{AgentID: get("agent"), Label: get("label"), Search: sessions.SearchNeedle(get("search")), Archived: get("archived")}
	if f.Archived != "true" && f.Archived != "all" {
		f.Archived = "false"
	}
	for _, k := range strings.Split(get("kinds"), ",") {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			if f.Kinds == nil {
				f.Kinds = map[string]bool{}
			}
			f.Kinds[k] = true
		}
	}
	f.ActiveMinutes, _ = strconv.Atoi(get("activeMinutes"))
	f.Waiting = get("waiting") == "1" || get("waiting") == "true"
	return f
}

// List is one page of the sessions matching f: those with a run in flight
// first, then those waiting on a person, then the rest, each newest first.
// Without a filter the walk stops at the page's end, so the first page
// costs the same at any number of sessions (plus the sessions running or
// waiting, which are sorted).
func (s *Server) List(f Filter, offset, limit int) Page {
	limit = min(max(limit, 1), pageMax)
	offset = max(offset, 0)
	now := time.Now().UnixMilli()
	active := s.runs.activeKeys()
	p := Page{Offset: offset, Limit: limit, Rows: []Row{}}
	var first, waiting []*sessions.Entry
	if !f.Waiting {
		for k := range active {
			if e := s.index.Get(k); e != nil && f.match(e, now) {
				first = append(first, e)
			}
		}
	}
	waits := map[string]bool{}
	for _, k := range s.last.replied() {
		if e := s.index.Get(k); e != nil && !active[k] && s.waiting(e, false) {
			waits[k] = true
			if f.match(e, now) {
				waiting = append(waiting, e)
			}
		}
	}
	sortNewest(first)
	sortNewest(waiting)
	// the page's entries are taken first and their rows built after the
	// walk: Each holds the index's read lock, and a row reads the index
	// again (a nested read lock deadlocks behind a waiting write)
	n := 0
	var page []*sessions.Entry
	take := func(e *sessions.Entry) {
		if n >= offset && len(page) < limit {
			page = append(page, e)
		}
		n++
	}
	for _, e := range append(first, waiting...) {
		take(e)
	}
	counting := f.narrow()
	if !f.Waiting {
		s.index.Each(func(e *sessions.Entry) bool {
			if active[e.Key] || waits[e.Key] || !f.match(e, now) {
				return true
			}
			take(e)
			// without a filter to count, stop one past the page: that row
			// only says a next page exists
			return counting || n <= offset+limit
		})
	}
	for _, e := range page {
		p.Rows = append(p.Rows, s.row(e, active[e.Key]))
	}
	if counting {
		p.Total = n
	} else {
		p.Total, p.Estimated = s.index.Len(), true
	}
	p.More = n > offset+limit
	return p
}

func sortNewest(es []*sessions.Entry) {
	slices.SortFunc(es, func(a, b *sessions.Entry) int {
		return cmp.Or(cmp.Compare(b.UpdatedAt, a.UpdatedAt), strings.Compare(a.Key, b.Key))
	})
}

func (s *Server) row(e *sessions.Entry, active bool) Row {
	r := Row{
		Key: e.Key, Kind: rules.Kind(e.Key, alias, e.ChatType), AgentID: agentOf(e), Label: e.Label,
		DisplayName: e.DisplayName, Channel: rules.FirstNonEmpty(e.Channel, e.LastChannel), Model: s.modelOf(e),
		SpawnedBy: e.Parent(), UpdatedAt: e.UpdatedAt, TotalTokens: e.TotalTokens, InputTokens: e.InputTokens,
		OutputTokens: e.OutputTokens, Status: e.Status, Active: active, Archived: e.Archived,
		Children: len(s.index.Children(e.Key)),
	}
	if g := e.Rares().Goal; g.Active() {
		r.Goal = g.Objective
	}
	if l, ok := s.last.get(e.Key); ok {
		r.Preview, r.PreviewRole, r.PreviewAt = l.preview, l.role, l.at
	}
	r.Waiting = s.waiting(e, active)
	return r
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = pageDefault
	}
	if u := userOf(r); u.Token != "" {
		s.listByTool(w, r, u, offset, limit)
		return
	}
	writeJSON(w, http.StatusOK, s.List(ParseFilter(q), offset, limit))
}

// listByTool is the list of a token login: sessions_list called with the
// user's token, so its visibility decides what the user sees.
func (s *Server) listByTool(w http.ResponseWriter, r *http.Request, u *User, offset, limit int) {
	q := r.URL.Query()
	params := map[string]any{"offset": offset, "limit": min(limit, pageMax)}
	for _, k := range []string{"label", "search"} {
		if v := q.Get(k); v != "" {
			params[k] = v
		}
	}
	if v := q.Get("agent"); v != "" {
		params["agentId"] = v
	}
	var res struct {
		Count    int              `json:"count"`
		Sessions []map[string]any `json:"sessions"`
	}
	if err := s.call(r.Context(), u.Token, "sessions_list", params, &res); err != nil {
		writeToolError(w, err)
		return
	}
	p := Page{Offset: offset, Limit: limit, Rows: []Row{}, Total: offset + res.Count, More: res.Count >= limit}
	for _, m := range res.Sessions {
		key, _ := m["key"].(string)
		if e := s.index.Get(key); e != nil {
			p.Rows = append(p.Rows, s.row(e, s.runs.active(key)))
		}
	}
	writeJSON(w, http.StatusOK, p)
}

// call calls a tool through the bus with token and decodes its reply.
func (s *Server) call(ctx context.Context, token, tool string, params any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return bus.CallJSON(ctx, s.o.Conn, s.o.Names, token, tool, params, out)
}

func writeToolError(w http.ResponseWriter, err error) {
	if e, ok := bus.AsError(err); ok {
		code := e.Code
		if code < 400 || code > 599 {
			code = http.StatusBadGateway
		}
		writeError(w, code, e.Message)
		return
	}
	writeError(w, http.StatusBadGateway, "the bus: "+err.Error())
}

// Detail is the session page: the row, the status card and signal log,
// the transcript, and recent runs. An admin or ops login reads them on the
// console's operator path (detail.go); a token login through the tools
// with its token (session_status, sessions_history), so it sees what
// that session's tools may see.
type Detail struct {
	Row          Row              `json:"row"`
	Route        any              `json:"route,omitempty"`
	Card         []Field          `json:"card"`
	Signals      *signals.Changes `json:"signals,omitempty"`
	StateVersion uint64           `json:"stateVersion"`
	History      any              `json:"history,omitempty"`
	Runs         []runs.Record    `json:"runs"`
	// Notes say, once each, what this login may not see on the page.
	Notes  []string `json:"notes,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	key := r.URL.Query().Get("key")
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = transcriptPage
	}
	limit = min(limit, 1000)
	// entry (1-based, as a search hit names it) asks for the transcript
	// around that entry when it is older than the newest page
	at, _ := strconv.ParseUint(r.URL.Query().Get("entry"), 10, 64)
	e := s.index.Get(key)
	d := Detail{Card: []Field{}}
	if e != nil {
		d.Row, d.Runs = s.row(e, s.runs.active(key)), s.runs.recent(key)
		d.Route = e.DeliveryContext
	}
	if u.Token != "" {
		// the tools decide what a token login sees, before the console's
		// own index says whether the session exists: a 404 here and a 403
		// there would tell it which sessions outside its view exist
		s.sessionByTool(w, r, u, key, limit, d)
		return
	}
	if e == nil {
		writeError(w, http.StatusNotFound, "no session "+strconv.Quote(key)+" (it may have been deleted or never existed)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	d.Card = s.card(e)
	ch, v, err := s.signalLog(ctx, key)
	if err != nil {
		d.Errors = append(d.Errors, "signal log: "+err.Error())
	}
	d.Signals, d.StateVersion = &ch, v
	if h, err := s.transcript(ctx, key, limit, at); err != nil {
		d.Errors = append(d.Errors, "transcript: "+err.Error())
	} else {
		d.History = h
	}
	writeJSON(w, http.StatusOK, d)
}

// sessionByTool is the session page of a token login: the tools, called
// with the login's token, decide what it sees.
func (s *Server) sessionByTool(w http.ResponseWriter, r *http.Request, u *User, key string, limit int, d Detail) {
	var st struct {
		Status       string           `json:"status"`
		Error        string           `json:"error"`
		StatusText   string           `json:"statusText"`
		StateVersion uint64           `json:"stateVersion"`
		StateChanges *signals.Changes `json:"stateChanges"`
	}
	if err := s.call(r.Context(), u.Token, "session_status", map[string]any{"sessionKey": key, "changesSince": 0}, &st); err != nil {
		writeError(w, http.StatusForbidden, "this login's session may not see "+strconv.Quote(key)+": session_status: "+err.Error())
		return
	}
	if st.Status == "forbidden" || st.Status == "error" {
		// a token login sees a session only if its tools may: say no
		// more than the tool did
		writeError(w, http.StatusForbidden, "this login's session may not see "+strconv.Quote(key)+": "+st.Error)
		return
	}
	d.Card, d.Signals, d.StateVersion = cardFromStatusText(st.StatusText), st.StateChanges, st.StateVersion
	var h json.RawMessage
	if err := s.call(r.Context(), u.Token, "sessions_history", map[string]any{"sessionKey": key, "limit": limit, "includeTools": true}, &h); err != nil {
		d.Notes = append(d.Notes, "This login's session may not read this transcript (sessions_history: "+err.Error()+").")
	} else if refused(h) {
		d.Notes = append(d.Notes, "This login's session may not read this transcript: "+refusal(h))
	} else {
		d.History = h
	}
	// runs are read from the bucket, not through the tools' visibility
	d.Runs = nil
	d.Notes = append(d.Notes, "A token login sees no runs: they are read from the runs bucket, which its tools do not show.")
	writeJSON(w, http.StatusOK, d)
}

// refused reports a tool reply that refused (status forbidden or error).
func refused(raw json.RawMessage) bool {
	var v struct{ Status string }
	return json.Unmarshal(raw, &v) == nil && (v.Status == "forbidden" || v.Status == "error")
}

// refusal is a refused reply's error text.
func refusal(raw json.RawMessage) string {
	var v struct{ Error string }
	_ = json.Unmarshal(raw, &v)
	return v.Error
}
