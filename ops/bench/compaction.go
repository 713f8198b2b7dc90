package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

const compactKeyFmt = "agent:compactor:bench:c%d"

func (e *env) compactSizes() (entries int, p plan) {
	if e.o.Quick {
		return 2000, plan{warm: 1, ops: 2}
	}
	return 10_000, plan{warm: 1, ops: 5}
}

// compaction: `sessionbus session compact` of a 10,000-entry session of
// realistic entries (user turns, assistant replies with tool calls, tool
// results), end to end: the ops request, the run under the session's lane
// on a gateway, the read of every entry through the transcript index, the
// summary calls (a stub model: agent compactor's script.summary, so the
// figure is sessionbus's own cost), the one compaction entry, the session
// entry and the signal. Each op compacts a session of its own, loaded
// beforehand (untimed). writes_per_send is per compaction, by stream.
func runCompaction(ctx context.Context, e *env) (Result, error) {
	n, p := e.compactSizes()
	total := p.warm + p.ops
	stop, err := e.compactGateway(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	if err := e.loadCompactSessions(ctx, total, n); err != nil {
		return Result{}, err
	}
	token, err := e.op.Mint(bus.Caller{Adapter: bus.AnyChannel}, time.Hour)
	if err != nil {
		return Result{}, err
	}
	next, calls := 0, 0
	var before map[string]uint64
	r, err := measure(ctx, p, func() error {
		if next == p.warm {
			if before, err = e.lastSeqs(ctx); err != nil {
				return err
			}
		}
		key := fmt.Sprintf(compactKeyFmt, next)
		next++
		body, _ := json.Marshal(map[string]any{"sessionKey": key})
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		out, err := bus.SessionOp(cctx, e.nc, e.names, "compact", token, body)
		if err != nil {
			return err
		}
		var res struct {
			Status, Error   string
			CompactionCount int64
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return err
		}
		if res.Status != "ok" || res.CompactionCount != 1 {
			return fmt.Errorf("compact %s: %s %s (count %d)", key, res.Status, res.Error, res.CompactionCount)
		}
		calls++
		return nil
	})
	if err != nil {
		return r, err
	}
	after, err := e.lastSeqs(ctx)
	if err != nil {
		return r, err
	}
	per, sum := writesPer(before, after, p.ops)
	r.WritesPerSend = per
	r.Dataset = fmt.Sprintf("%d realistic entries per session, script summary (stub model), window 200k; %.2f stream writes per compaction (%s)", n, sum, writesLine(per))
	if calls != total {
		return r, errors.New("not every compaction ran")
	}
	return r, nil
}

// compactGateway starts a gateway whose agent compactor can summarize.
func (e *env) compactGateway(ctx context.Context) (stop func(), err error) {
	cfg := *e.cfg
	cfg.Agents.List = append([]config.Agent{}, cfg.Agents.List...)
	cfg.Agents.List = append(cfg.Agents.List, config.Agent{ID: "compactor", Runtime: "script",
		Script: map[string]any{"summary": "## Goal\nbenchmark the compaction"}})
	nc, err := e.connectInternal("bench compaction gateway")
	if err != nil {
		return nil, err
	}
	glog := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	g, err := gateway.StartWithOptions(sctx, nc, &cfg, e.op, "bench-compact-gw", glog, gateway.Options{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return func() { g.Stop(); nc.Close() }, nil
}

// loadCompactSessions creates count sessions of n sample entries each.
func (e *env) loadCompactSessions(ctx context.Context, count, n int) error {
	store, err := sessions.Open(ctx, e.js, e.names)
	if err != nil {
		return err
	}
	entries := archives.SampleEntries(n, 7)
	return e.timed("compaction sessions (realistic entries)", count*n, func() error {
		for i := range count {
			key := fmt.Sprintf(compactKeyFmt, i)
			now := time.Now().UnixMilli()
			if _, err := store.Create(ctx, &sessions.Entry{Key: key, AgentID: "compactor", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			for j := 0; j < n; j += transcripts.MaxBatch {
				if _, err := e.tr.Append(ctx, bus.EncodeKey(key), entries[j:min(j+transcripts.MaxBatch, n)]...); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
