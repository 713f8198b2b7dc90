package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// statusKey is a sub-agent of the requester, so tree visibility shows it.
const statusKey = "agent:main:subagent:status-bench"

// runSessionStatus calls session_status {sessionKey} through NATS with a
// real token. The session's entry has no token counters, as a session run
// by sessionbus's runtimes has none, so every call also reads the
// transcript tail for the latest usage record: the common path.
func runSessionStatus(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	d := e.worker.Deps
	now := time.Now().UnixMilli()
	_, err := d.Store.Create(cctx, &sessions.Entry{
		Key: statusKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		SpawnedBy: requesterKey, Channel: "webchat",
	})
	if err != nil && !errors.Is(err, sessions.ErrExists) {
		return Result{}, err
	}
	if err == nil {
		if _, err := d.Transcripts.Append(cctx, bus.EncodeKey(statusKey),
			[]byte(`{"role":"user","content":"status bench"}`),
			[]byte(`{"type":"message","message":{"role":"assistant","content":"ok","usage":{"input":1200,"output":300,"cacheRead":800,"cacheWrite":200,"totalTokens":2500}}}`),
			[]byte(`{"role":"user","content":"next"}`)); err != nil {
			return Result{}, err
		}
	}
	params := fmt.Appendf(nil, `{"sessionKey":%q}`, statusKey)
	first, err := bus.Call(cctx, e.nc, e.names, e.token, "session_status", params)
	if err != nil {
		return Result{}, err
	}
	var chk struct {
		SessionKey string `json:"sessionKey"`
		StatusText string `json:"statusText"`
	}
	if err := json.Unmarshal(first, &chk); err != nil {
		return Result{}, fmt.Errorf("session_status reply: %w: %.300s", err, first)
	}
	if chk.SessionKey != statusKey || !strings.Contains(chk.StatusText, "🧮 Tokens: 1.2k in / 300 out") {
		return Result{}, fmt.Errorf("session_status %s: no back-filled card: %.400s", params, first)
	}
	r, err := measure(ctx, e.sz.fast, func() error {
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "session_status", params)
		return err
	})
	r.Dataset = "sub-agent session, sparse entry back-filled from a 3-entry transcript"
	r.ReplyBytes = len(first)
	return r, err
}
