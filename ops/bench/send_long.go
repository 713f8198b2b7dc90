package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// send_wait_long: send_wait's sequential send-and-wait, to a spawned
// session that already holds 1,000 entries (no compaction), run by one
// gateway whose agent reads the model's context every turn: a script that
// can summarize (the echo of send_wait reads none, so a long session would
// cost it nothing to begin with). The context comes through the gateway's
// context cache (bus.contextCacheBytes, default), so a turn reads only
// what was appended since the last one; the bar is a p50 within 1.2x
// send_wait's. The same sends with the cache off, fewer of them, to a
// session of its own loaded the same way, show what it saves.

const (
	sendLongFmt     = "agent:main:bench:sendlong:t%d"
	sendLongEntries = 1000
	sendLongEntry   = 200 // bytes per seeded entry
	// sendLongWindow is the agent's context window: far above what the
	// session grows to over the run (about 50 tokens per entry), so no
	// turn compacts
	sendLongWindow = 2_000_000
)

func runSendWaitLong(ctx context.Context, e *env) (Result, error) {
	p := e.sz.send
	entries := sendLongEntries
	if e.o.Quick {
		entries = 300
	}
	on, err := e.sendLong(ctx, 0, entries, "64mb", p)
	if err != nil {
		return on.res, err
	}
	off, err := e.sendLong(ctx, 1, entries, "0", plan{warm: max(p.warm/10, 1), ops: max(p.ops/10, 5)})
	if err != nil {
		return on.res, err
	}
	r := on.res
	r.WritesPerSend = on.writes
	r.Dataset = fmt.Sprintf("sessions_send timeoutSeconds 30 to 1 spawned session holding %d entries of %d B before the first send (it grows by 2 per send), "+
		"1 gateway, script echo that reads the model's context, context cache on; per send: %.2f stream writes (%s), %.1f gateway messages out, %.1f entries read for the context "+
		"(cache: %d hits, %d misses, %d rebuilds); cache off: p50 %s, %.1f entries read per send (%d sends)",
		entries, sendLongEntry, on.total, writesLine(on.writes), on.msgsOut, on.read, on.stats.Hits, on.stats.Misses, on.stats.Rebuilds,
		time.Duration(off.res.P50).Round(10*time.Microsecond), off.read, off.res.Ops)
	if on.stats.Rebuilds > 0 {
		return r, fmt.Errorf("send_wait_long: %d context rebuilds, want none (a compaction?)", on.stats.Rebuilds)
	}
	return r, nil
}

// sendLongRun is what one phase of send_wait_long measured: per timed
// send, the stream writes by stream, the messages the gateway's
// connection sent and the transcript entries read for the context.
type sendLongRun struct {
	res     Result
	writes  map[string]float64
	total   float64 // writes per send, every stream
	msgsOut float64
	read    float64
	stats   gateway.ContextCacheStats
}

// sendLong loads target i with n entries, starts a gateway with the
// context cache bounded by cacheBytes and measures plan p of sends to it.
func (e *env) sendLong(ctx context.Context, i, n int, cacheBytes string, p plan) (sendLongRun, error) {
	var out sendLongRun
	target := fmt.Sprintf(sendLongFmt, i)
	if err := e.loadSendLong(ctx, target, n); err != nil {
		return out, err
	}
	g, nc, stop, err := e.sendLongGateway(ctx, cacheBytes)
	if err != nil {
		return out, err
	}
	defer stop()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	size, err := e.checkFirstSend(cctx, target, "ping")
	if err != nil {
		return out, err
	}
	params := sendParamsJSON(target)
	warm := 0
	var seqs0 map[string]uint64
	var msgs0 uint64
	var stats0 gateway.ContextCacheStats
	out.res, err = measure(ctx, p, func() error {
		if warm == p.warm { // the first timed send: count from here
			var serr error
			if seqs0, serr = e.lastSeqs(ctx); serr != nil {
				return serr
			}
			msgs0, stats0 = nc.Stats().OutMsgs, g.ContextCacheStats()
		}
		warm++
		_, serr := e.send(cctx, params)
		return serr
	})
	if err != nil {
		return out, err
	}
	msgs1, stats1 := nc.Stats().OutMsgs, g.ContextCacheStats()
	seqs1, err := e.lastSeqs(ctx)
	if err != nil {
		return out, err
	}
	out.writes, out.total = writesPer(seqs0, seqs1, p.ops)
	out.msgsOut = round(float64(msgs1-msgs0)/float64(p.ops), 1)
	out.read = round(float64(stats1.EntriesRead-stats0.EntriesRead)/float64(p.ops), 1)
	out.stats = stats1
	out.res.ReplyBytes = size
	if cacheBytes != "0" && stats1.Hits == stats0.Hits {
		return out, errors.New("send_wait_long: no send was served from the context cache")
	}
	return out, nil
}

// loadSendLong creates the target session (spawned by the requester, as
// send_wait's are) and appends n entries to its transcript in batches.
func (e *env) loadSendLong(ctx context.Context, target string, n int) error {
	return e.timed(fmt.Sprintf("send_wait_long: %d entries in %s", n, target), n, func() error {
		store, err := sessions.Open(ctx, e.js, e.names)
		if err != nil {
			return err
		}
		now, depth := time.Now().UnixMilli(), 1
		if _, err := store.Create(ctx, &sessions.Entry{Key: target, AgentID: "main", SessionID: sessions.NewID(),
			CreatedAt: now, UpdatedAt: now, SpawnedBy: requesterKey, SpawnDepth: &depth, Label: "bench long send target"}); err != nil && !errors.Is(err, sessions.ErrExists) {
			return err
		}
		if err := transcripts.LoadSingle(ctx, e.tr, bus.EncodeKey(target), n, sendLongEntry); err != nil {
			return err
		}
		if err := e.worker.Deps.Index.Sync(ctx); err != nil {
			return err
		}
		if e.worker.Deps.Index.Get(target) == nil {
			return fmt.Errorf("worker index lacks %s", target)
		}
		return nil
	})
}

// sendLongGateway starts one gateway, on its own connection, whose agent
// main echoes and can summarize (so each turn reads its context), on a
// model with a window the run never fills.
func (e *env) sendLongGateway(ctx context.Context, cacheBytes string) (*gateway.Gateway, *nats.Conn, func(), error) {
	cfg := *e.cfg
	cfg.Bus.ContextCacheBytes = cacheBytes
	cfg.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Model: "bench/long",
		Script: map[string]any{"summary": "## Goal\nbenchmark a long session"}}}
	cfg.Models.Providers = map[string]config.ModelProvider{"bench": {Models: []config.CatalogModel{{ID: "long", ContextWindow: sendLongWindow}}}}
	nc, err := e.connectInternal("bench send_wait_long gateway")
	if err != nil {
		return nil, nil, nil, err
	}
	glog := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	g, err := gateway.StartWithOptions(sctx, nc, &cfg, e.op, "bench-long-gw", glog, gateway.Options{})
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("start gateway: %w", err)
	}
	return g, nc, func() { g.Stop(); nc.Close() }, nil
}
