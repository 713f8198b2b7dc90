package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// ensureHistorySession gives a bench-loaded transcript the session entry
// sessions_history resolves it through (created once, if absent).
func (e *env) ensureHistorySession(ctx context.Context, key string) error {
	if e.histDone[key] {
		return nil
	}
	now := time.Now().UnixMilli()
	_, err := e.worker.Deps.Store.Create(ctx, &sessions.Entry{
		Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		Label: "bench transcript", Channel: "webchat",
	})
	if err != nil && !errors.Is(err, sessions.ErrExists) {
		return err
	}
	e.histDone[key] = true
	return nil
}

// runHistory calls tool sessions_history {sessionKey, limit 50[, offset]}
// through NATS with a real token, after checking one reply. cold empties
// the worker's view cache before every call, so each one projects all its
// entries, as the first call after a worker starts does.
func (e *env) runHistory(ctx context.Context, key string, offset, total int, cold bool, dataset string) (Result, error) {
	if err := e.ensureHistorySession(ctx, key); err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	params := fmt.Appendf(nil, `{"sessionKey":%q,"limit":%d}`, key, page)
	if offset > 0 {
		params = fmt.Appendf(nil, `{"sessionKey":%q,"limit":%d,"offset":%d}`, key, page, offset)
	}
	first, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_history", params)
	if err != nil {
		return Result{}, err
	}
	var chk struct {
		Status        string            `json:"status"`
		Error         string            `json:"error"`
		Messages      []json.RawMessage `json:"messages"`
		TotalMessages *int              `json:"totalMessages"`
	}
	if err := json.Unmarshal(first, &chk); err != nil {
		return Result{}, fmt.Errorf("sessions_history reply: %w: %.300s", err, first)
	}
	if chk.Status != "" || len(chk.Messages) != page {
		return Result{}, fmt.Errorf("sessions_history %s: status %q %q, %d messages: %.300s", params, chk.Status, chk.Error, len(chk.Messages), first)
	}
	if offset > 0 && (chk.TotalMessages == nil || *chk.TotalMessages != total) {
		return Result{}, fmt.Errorf("sessions_history %s: totalMessages %v, want %d", params, chk.TotalMessages, total)
	}
	r, err := measure(ctx, e.sz.hist, func() error {
		if cold {
			e.worker.Deps.ResetHistoryCache()
		}
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_history", params)
		return err
	})
	r.Dataset = dataset
	r.ReplyBytes = len(first)
	cache := e.worker.Deps.HistoryCacheStats().Bytes
	r.CacheBytes = &cache
	return r, err
}

func runHistoryTail100(ctx context.Context, e *env) (Result, error) {
	if !e.histDone[hist100Key] {
		if err := e.timed(fmt.Sprintf("transcripts: 1 session x %d entries", hist100Len), hist100Len, func() error {
			return e.loadOne(ctx, hist100Key, hist100Len)
		}); err != nil {
			return Result{}, err
		}
	}
	return e.runHistory(ctx, hist100Key, 0, hist100Len, false,
		fmt.Sprintf("limit %d, a %d-entry session (contiguous)", page, hist100Len))
}

func runHistoryTail1M(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSingle(ctx); err != nil {
		return Result{}, err
	}
	return e.runHistory(ctx, singleKey, 0, e.sz.singleN, false,
		fmt.Sprintf("limit %d, a %d-entry session", page, e.sz.singleN))
}

// history_tail_1m_cold: history_tail_1m with the view cache emptied before
// every call (the emptying is timed too; it is a map allocation).
func runHistoryTail1MCold(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSingle(ctx); err != nil {
		return Result{}, err
	}
	return e.runHistory(ctx, singleKey, 0, e.sz.singleN, true,
		fmt.Sprintf("limit %d, a %d-entry session, view cache emptied before each call", page, e.sz.singleN))
}

func runHistoryOffset1M(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSingle(ctx); err != nil {
		return Result{}, err
	}
	off := e.sz.singleN / 2
	return e.runHistory(ctx, singleKey, off, e.sz.singleN, false,
		fmt.Sprintf("limit %d, offset %d, a %d-entry session", page, off, e.sz.singleN))
}

func runHistoryTailInterleaved(ctx context.Context, e *env) (Result, error) {
	in, err := e.ensureInterleaved(ctx)
	if err != nil {
		return Result{}, err
	}
	return e.runHistory(ctx, in.key, 0, e.sz.interPerSession, false,
		fmt.Sprintf("limit %d, a %d-entry session in a %s", page, e.sz.interPerSession, in.dataset))
}
