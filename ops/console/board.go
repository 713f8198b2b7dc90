package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// The mission board: a session's sub-agent tree by spawnedBy, one row per
// child with its registry record's state, active rows first; and the kill
// and steer actions, which call the subagents tool as the child's
// controller (its parent) would, so its limits, texts and cascade apply.

// Board statuses.
const (
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusTimeout = "timeout"
	StatusKilled  = "killed"
)

const (
	// boardMaxRows bounds one board: enough for 200 concurrent children
	// and their recent history.
	boardMaxRows = 2000
	// boardRecent is how long an ended child stays on the board without
	// the history toggle.
	boardRecent = time.Hour
)

// BoardRow is one child on the board.
type BoardRow struct {
	Key        string `json:"key"`
	Depth      int    `json:"depth"`
	Parent     string `json:"parent"`
	Controller string `json:"controller,omitempty"`
	Label      string `json:"label"`
	AgentID    string `json:"agentId"`
	Model      string `json:"model,omitempty"`
	Status     string `json:"status"`
	RunID      string `json:"runId,omitempty"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	EndedAt    int64  `json:"endedAt,omitempty"`
	Elapsed    int64  `json:"elapsedMs"`
	Tokens     int64  `json:"totalTokens"`
	// Cost is the session's counters at its model's catalog price (USD;
	// absent when the catalog gives no price).
	Cost float64 `json:"costUsd,omitempty"`
	// Live says a turn of the child runs now: a child whose status is
	// running may be idle, waiting on its own children.
	Live     bool   `json:"live,omitempty"`
	Announce string `json:"announce,omitempty"`
	Pending  int    `json:"pendingDescendants"`
	Error    string `json:"error,omitempty"`
}

// Board is a session's tree.
type Board struct {
	Root      Row        `json:"root"`
	Rows      []BoardRow `json:"rows"`
	Active    int        `json:"active"`
	Truncated bool       `json:"truncated,omitempty"`
}

// Tree builds the board of root. history keeps children that ended long ago.
func (s *Server) Tree(root *sessions.Entry, history bool) Board {
	b := Board{Root: s.row(root, s.runs.active(root.Key)), Rows: []BoardRow{}}
	now := time.Now().UnixMilli()
	seen := map[string]bool{root.Key: true}
	var walk func(parent string, depth int) int
	walk = func(parent string, depth int) int {
		kids := s.index.Children(parent)
		rows := make([]BoardRow, 0, len(kids))
		for _, e := range kids {
			if seen[e.Key] {
				continue
			}
			seen[e.Key] = true
			rows = append(rows, s.boardRow(e, parent, depth, now))
		}
		slices.SortStableFunc(rows, func(a, b BoardRow) int {
			if aa, ba := active(a.Status), active(b.Status); aa != ba {
				if aa {
					return -1
				}
				return 1
			}
			return int(b.StartedAt - a.StartedAt)
		})
		pending := 0
		for _, r := range rows {
			if len(b.Rows) >= boardMaxRows {
				b.Truncated = true
				break
			}
			if !history && !active(r.Status) && r.EndedAt > 0 && now-r.EndedAt > boardRecent.Milliseconds() {
				continue
			}
			at := len(b.Rows)
			b.Rows = append(b.Rows, r)
			n := walk(r.Key, depth+1)
			b.Rows[at].Pending = n
			pending += n
			if active(r.Status) {
				pending++
				b.Active++
			}
		}
		return pending
	}
	walk(root.Key, 1)
	return b
}

func active(status string) bool { return status == StatusQueued || status == StatusRunning }

func (s *Server) boardRow(e *sessions.Entry, parent string, depth int, now int64) (r BoardRow) {
	r = BoardRow{Key: e.Key, Depth: depth, Parent: parent, Label: e.Label, AgentID: agentOf(e), Model: s.modelOf(e), Tokens: e.TotalTokens,
		Live: s.runs.active(e.Key)}
	// priced at the model the row ends up naming (the registry's, if any)
	defer func() { r.Cost = s.costOf(e, r.Model) }()
	rec := s.children.Get(e.Key)
	if rec == nil {
		r.Status = StatusDone
		if s.runs.active(e.Key) {
			r.Status = StatusRunning
		}
		return r
	}
	r.Controller, r.RunID, r.StartedAt, r.EndedAt = rec.ControllerSessionKey, rec.RunID, rec.StartedAt, rec.EndedAt
	r.Label = rec.Label
	if r.Label == "" {
		r.Label = rec.Task
	}
	if rec.Model != "" {
		r.Model = rec.Model
	}
	if rec.TotalTokens > r.Tokens {
		r.Tokens = rec.TotalTokens
	}
	r.Error = rec.Error
	if rec.Announce != nil {
		r.Announce = rec.Announce.State
	}
	outcome := rec.Outcome
	// a kill or a sweep writes the run record first; the registry catches
	// up when the gateway finishes its bookkeeping
	if run := s.runs.get(rec.RunID); run != nil && run.Terminal() && outcome == "" {
		outcome, r.EndedAt = run.Status, run.EndedAt
	}
	switch outcome {
	case "":
		r.Status = StatusQueued
		if rec.StartedAt > 0 {
			r.Status = StatusRunning
		}
	case subagents.OutcomeOK:
		r.Status = StatusDone
	case subagents.OutcomeError:
		r.Status = StatusFailed
	case subagents.OutcomeTimeout:
		r.Status = StatusTimeout
	case subagents.OutcomeKilled:
		r.Status = StatusKilled
	default:
		r.Status = outcome
	}
	switch {
	case r.StartedAt == 0:
	case r.EndedAt > 0:
		r.Elapsed = r.EndedAt - r.StartedAt
	default:
		r.Elapsed = now - r.StartedAt
	}
	return r
}

// costOf prices a session's token counters at model's catalog price, as
// the status card does when no recorded cost is at hand.
func (s *Server) costOf(e *sessions.Entry, model string) float64 {
	if s.o.Price == nil || model == "" {
		return 0
	}
	p := s.o.Price(model)
	if !p.Priced() {
		return 0
	}
	rares := e.Rares()
	return (float64(e.InputTokens)*p.Input + float64(e.OutputTokens)*p.Output +
		float64(rares.CacheRead)*p.CacheRead + float64(rares.CacheWrite)*p.CacheWrite) / 1e6
}

func (s *Server) handleBoard(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	key := r.URL.Query().Get("key")
	e := s.index.Get(key)
	if e == nil {
		writeError(w, http.StatusNotFound, "no session "+fmt.Sprintf("%q", key))
		return
	}
	if u.Token != "" && key != u.Session {
		writeError(w, http.StatusForbidden, "a token login sees its own session's board only")
		return
	}
	writeJSON(w, http.StatusOK, s.Tree(e, r.URL.Query().Get("history") == "1"))
}

type actionRequest struct {
	// Parent is whose children "all" means (kill all).
	Parent  string `json:"parent"`
	Target  string `json:"target"`
	All     bool   `json:"all"`
	Message string `json:"message"`
}

func decodeAction(w http.ResponseWriter, r *http.Request) (actionRequest, bool) {
	var a actionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&a); err != nil {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"target\": CHILD KEY} or {\"parent\": KEY, \"all\": true}")
		return a, false
	}
	return a, true
}

// controllerOf is the session that controls a child: its registry
// record's controller, else its parent.
func (s *Server) controllerOf(child string) (string, bool) {
	if rec := s.children.Get(child); rec != nil && rec.ControllerSessionKey != "" {
		return rec.ControllerSessionKey, true
	}
	if e := s.index.Get(child); e != nil && e.Parent() != "" {
		return e.Parent(), true
	}
	return "", false
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	a, ok := decodeAction(w, r)
	if !ok {
		return
	}
	as, target := a.Parent, a.Target
	if a.All {
		target = "all"
		if s.index.Get(as) == nil {
			writeError(w, http.StatusNotFound, "no session "+fmt.Sprintf("%q", as))
			return
		}
	} else if as, ok = s.controllerOf(a.Target); !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%q is no sub-agent this console knows", a.Target))
		return
	}
	s.subagents(w, r, as, map[string]any{"action": "kill", "target": target})
}

func (s *Server) handleSteer(w http.ResponseWriter, r *http.Request) {
	a, ok := decodeAction(w, r)
	if !ok {
		return
	}
	as, ok := s.controllerOf(a.Target)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%q is no sub-agent this console knows", a.Target))
		return
	}
	s.subagents(w, r, as, map[string]any{"action": "steer", "target": a.Target, "message": a.Message})
}

// subagents calls the tool as session as, records the action in as's
// signal log with the console user, and answers the tool's reply.
func (s *Server) subagents(w http.ResponseWriter, r *http.Request, as string, params map[string]any) {
	u := userOf(r)
	tok, err := s.o.Operator.Mint(bus.Caller{SessionKey: as}, 2*time.Minute)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var res map[string]any
	err = s.call(r.Context(), tok, "subagents", params, &res)
	outcome := "error"
	if err == nil {
		outcome, _ = res["status"].(string)
	}
	s.record(r, u, as, fmt.Sprintf("console %s: subagents %s %v: %s", u.Name, params["action"], params["target"], outcome),
		map[string]any{"action": params["action"], "target": params["target"]})
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// record appends a console action to key's signal log, with the acting
// user as the actor. Best effort, like every signal append: the action
// happened whether or not its record could be written, and the log says
// why not.
func (s *Server) record(r *http.Request, u *User, key, summary string, payload map[string]any) {
	ev := signals.Event{SessionKey: key, Kind: signals.KindConsoleAction, ActorType: signals.ActorHuman,
		ActorID: "console:" + u.Name, Summary: summary, Payload: payload}
	if _, _, err := s.signals.Append(r.Context(), ev); err != nil {
		s.log.Warn("console: could not record an action in the signal log", "sessionKey", key, "user", u.Name, "err", err)
	}
}
