package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/ops/inspect"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// The ops page: what `sessionbus inspect` reports (streams, buckets,
// consumer lag, stuck runs, pending announces and notices), from the same
// code, plus the runs in flight and the archives.

// Ops is the ops page's data.
type Ops struct {
	Report    *inspect.Report  `json:"report"`
	InFlight  []runs.Record    `json:"inFlight"`
	Archives  []*archives.Meta `json:"archives"`
	Connected bool             `json:"connected"`
	At        int64            `json:"at"`
}

func (s *Server) handleOps(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "the ops page needs a credentials login (admin or ops): a token login sees sessions only")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	rep, err := inspect.Read(ctx, s.js, inspect.Options{Names: s.o.Names, StuckAfter: s.o.StuckAfter})
	if err != nil {
		writeError(w, http.StatusBadGateway, "read the deployment: "+err.Error())
		return
	}
	o := Ops{Report: rep, InFlight: s.runs.running(), Archives: []*archives.Meta{}, Connected: s.o.Conn.IsConnected(), At: time.Now().UnixMilli()}
	if o.InFlight == nil {
		o.InFlight = []runs.Record{}
	}
	// only read archives that exist: the console creates no store
	if rep.HasStream("OBJ_" + s.o.Names.ArchivesBucket()) {
		if st, err := archives.Open(ctx, s.js, s.o.Names); err == nil {
			if ms, err := st.List(ctx); err == nil {
				for _, m := range ms {
					m.Entry = nil
				}
				o.Archives = ms
			}
		}
	}
	writeJSON(w, http.StatusOK, o)
}

// handleArchive downloads one archive: the session's transcript as JSONL,
// as `sessionbus archive get` writes it.
func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "archives need a credentials login (admin or ops)")
		return
	}
	id := r.URL.Query().Get("id")
	st, err := archives.Open(r.Context(), s.js, s.o.Names)
	if err != nil {
		writeError(w, http.StatusBadGateway, "open the archives: "+err.Error())
		return
	}
	m, err := st.Info(r.Context(), id)
	if errors.Is(err, archives.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no archive %q", id))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(safeName(m.ID)+".jsonl"))
	if _, err := st.Read(r.Context(), id, w); err != nil {
		// the status is sent: the truncated body and this log are all
		// that can say so
		s.log.Warn("console: archive download failed", "id", id, "err", err)
	}
}

// safeName keeps a file name to letters, digits and -_.
func safeName(s string) string {
	return strings.Map(func(c rune) rune {
		if c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			return c
		}
		return '_'
	}, s)
}

// sessionOps are the workers' session operations the page may call, each
// with the body fields it forwards besides the key: delete and reset (the
// transcript archived first), stop (the running turn aborted), and the
// settings an admin edits on the session's page.
var sessionOps = map[string][]string{
	"delete":      nil,
	"reset":       nil,
	"stop":        nil,
	"goal":        {"goal", "clear"},
	"send-policy": {"sendPolicy"},
	"queue":       {"mode"},
	"pin":         {"pinned"},
}

// handleSessionOp calls a session operation through the workers, as
// `sessionbus session OP` does, and records it in the session's signal
// log with the user.
func (s *Server) handleSessionOp(w http.ResponseWriter, r *http.Request) {
	s.sessionOp(w, r, r.PathValue("op"))
}

// handleStop stops a session's running turn (the page's Stop button).
func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) { s.sessionOp(w, r, "stop") }

func (s *Server) sessionOp(w http.ResponseWriter, r *http.Request, op string) {
	fields, known := sessionOps[op]
	if !known {
		writeError(w, http.StatusNotFound, "unknown session operation "+strconv.Quote(op)+": one of delete, reset, stop, goal, send-policy, queue, pin")
		return
	}
	u := userOf(r)
	var req map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		req = nil
	}
	key, _ := req["key"].(string)
	if key == "" {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"key\": SESSION KEY}")
		return
	}
	if s.index.Get(key) == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no session %q", key))
		return
	}
	tok, err := s.o.Operator.Mint(bus.Caller{Adapter: bus.AnyChannel}, 11*time.Minute)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	args := map[string]any{"sessionKey": key}
	payload := map[string]any{"action": op}
	for _, f := range fields {
		if v, ok := req[f]; ok {
			args[f], payload[f] = v, v
		}
	}
	if op == "goal" {
		args["actor"] = "console:" + u.Name
	}
	body, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
	reply, err := bus.SessionOp(ctx, s.o.Conn, s.o.Names, op, tok, body)
	outcome := "ok"
	if err != nil {
		outcome = "error: " + err.Error()
	} else if op == "stop" {
		var res struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(reply, &res) == nil && res.Status != "" {
			outcome = res.Status
		}
	}
	// after a delete this starts the key's log anew: the record of who
	// deleted the session outlives it
	s.record(r, u, key, fmt.Sprintf("console %s: session %s: %s", u.Name, op, outcome), payload)
	s.log.Info("console: session operation", "op", op, "sessionKey", key, "user", u.Name, "outcome", outcome)
	if err != nil {
		writeToolError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(reply)
}

// handleRestore restores an archived session under its key, as `sessionbus
// archive restore` does (the same code): an admin action, refused for ops
// by actor, recorded in the restored session's signal log with the user.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	var req struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.ID == "" {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"id\": ARCHIVE ID}")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
	st, err := archives.Open(ctx, s.js, s.o.Names)
	if err != nil {
		writeError(w, http.StatusBadGateway, "open the archives: "+err.Error())
		return
	}
	m, err := st.Info(ctx, req.ID)
	if errors.Is(err, archives.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no archive %q (the operations page lists them)", req.ID))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	tr, err := transcripts.Open(ctx, s.o.Conn, s.js, s.o.Names)
	if err != nil {
		writeError(w, http.StatusBadGateway, "open the transcripts: "+err.Error())
		return
	}
	defer tr.Close()
	ops := &lifecycle.Ops{Sessions: s.store, Transcripts: tr, Archives: st, JS: s.js, Log: s.log}
	res, err := ops.Restore(ctx, m.ID, nil)
	outcome := "ok"
	if err != nil {
		outcome = "error: " + err.Error()
	}
	s.record(r, u, m.Key, fmt.Sprintf("console %s: restore archive %s: %s", u.Name, m.ID, outcome), map[string]any{"action": "restore", "archive": m.ID})
	s.log.Info("console: archive restore", "archive", m.ID, "sessionKey", m.Key, "user", u.Name, "outcome", outcome)
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleModel sets or clears a session's model override and thinking
// level with session_status, the tool an agent (or /model) sets them
// with, so its checks (allowed models, supported levels) apply. A
// sub-agent may not call session_status itself: the console calls it as
// the child's controller, naming the child.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	var req struct {
		Key           string  `json:"key"`
		Model         *string `json:"model"`
		ThinkingLevel *string `json:"thinkingLevel"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.Key == "" || (req.Model == nil && req.ThinkingLevel == nil) {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"key\": SESSION KEY, \"model\": \"provider/model\" (\"\" resets it), \"thinkingLevel\": LEVEL}")
		return
	}
	e := s.index.Get(req.Key)
	if e == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no session %q", req.Key))
		return
	}
	as := req.Key
	if e.Parent() != "" {
		if c, ok := s.controllerOf(req.Key); ok {
			as = c
		}
	}
	params := map[string]any{"sessionKey": req.Key}
	payload := map[string]any{"action": "model"}
	if req.Model != nil {
		params["model"], payload["model"] = *req.Model, *req.Model
	}
	if req.ThinkingLevel != nil {
		params["thinkingLevel"], payload["thinkingLevel"] = *req.ThinkingLevel, *req.ThinkingLevel
	}
	tok, err := s.o.Operator.Mint(bus.Caller{SessionKey: as}, 2*time.Minute)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var res map[string]any
	err = s.call(r.Context(), tok, "session_status", params, &res)
	outcome := "ok"
	if err != nil {
		outcome = "error: " + err.Error()
	}
	var set []string
	if req.Model != nil {
		set = append(set, "model "+strconv.Quote(*req.Model))
	}
	if req.ThinkingLevel != nil {
		set = append(set, "thinking "+strconv.Quote(*req.ThinkingLevel))
	}
	s.record(r, u, req.Key, fmt.Sprintf("console %s: session %s: %s", u.Name, strings.Join(set, ", "), outcome), payload)
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "modelOverride": res["modelOverride"], "thinkingLevel": res["thinkingLevel"]})
}
