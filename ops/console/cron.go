package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

// The cron page: the jobs with their next tick, last run and outcome,
// read through the workers' cron operations (as `sessionbus cron list`
// does), and "run now" (`sessionbus cron run`).

// cronOp sends one cron operation with an ops token the console mints.
func (s *Server) cronOp(ctx context.Context, op string, body any) ([]byte, error) {
	tok, err := s.o.Operator.Mint(bus.Caller{Adapter: bus.AnyChannel}, time.Minute)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(body)
	return bus.CronOp(ctx, s.o.Conn, s.o.Names, op, tok, b)
}

func (s *Server) handleCron(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "cron jobs need a credentials login (admin or ops): a token login sees sessions only")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	reply, err := s.cronOp(ctx, "list", map[string]any{})
	if err != nil {
		writeToolError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(reply)
}

// handleCronRun queues a run of a job now; the run is recorded on the
// job's session's signal log as a console action.
func (s *Server) handleCronRun(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	if u.Token != "" {
		writeError(w, http.StatusForbidden, "running a cron job needs a credentials login (admin)")
		return
	}
	var req struct {
		JobID   string `json:"jobId"`
		AgentID string `json:"agentId"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.JobID == "" {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"jobId\": JOB ID}")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	reply, err := s.cronOp(ctx, "run", map[string]any{"jobId": req.JobID})
	outcome := "ok"
	if err != nil {
		outcome = "error: " + err.Error()
	}
	if req.AgentID != "" {
		key := "agent:" + req.AgentID + ":cron:" + req.JobID
		s.record(r, u, key, fmt.Sprintf("console %s: cron run %s: %s", u.Name, req.JobID, outcome), map[string]any{"action": "cron-run"})
	}
	s.log.Info("console: cron run", "job", req.JobID, "user", u.Name, "outcome", outcome)
	if err != nil {
		writeToolError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(reply)
}
