package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

// spawn_accept: sessions_spawn through NATS with a real
// token, up to the accepted reply (always non-blocking; no gateway runs
// the children). The spawns come from spawnRequesters sessions in turn,
// each with its own token (verified once, then cached, as a requester's
// run token is): every requester keeps all its children active, so the
// bench config lifts maxChildrenPerAgent. Critical path, measured against
// raw_js_publish: the tool request, then one wave of four JetStream writes
// pipelined on one connection (the registry record, the commit point; the
// child's entry; the pending run record; the run request).
//
// The children it leaves behind would be run by any gateway a later
// benchmark starts: their run requests, run records and registry records
// are purged afterwards (their session entries stay; it runs after the
// list benchmarks, which count entries).

const (
	spawnRequesterFmt = "agent:main:bench:spawn:r%d"
	spawnRequesters   = 64
)

func runSpawnAccept(ctx context.Context, e *env) (Result, error) {
	tokens := make([]string, spawnRequesters)
	for i := range tokens {
		tok, err := e.op.Mint(bus.Caller{SessionKey: fmt.Sprintf(spawnRequesterFmt, i)}, 24*time.Hour)
		if err != nil {
			return Result{}, err
		}
		tokens[i] = tok
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	params := []byte(`{"task":"bench: summarize","label":"bench"}`)
	i := 0
	replyBytes := 0
	r, err := measure(ctx, e.sz.mid, func() error {
		out, err := bus.Call(cctx, e.nc, e.names, tokens[i%spawnRequesters], "sessions_spawn", params)
		i++
		if err != nil {
			return err
		}
		var res struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return err
		}
		if res.Status != "accepted" {
			return fmt.Errorf("spawn not accepted: %s %s", res.Status, res.Error)
		}
		replyBytes = len(out)
		return nil
	})
	r.Dataset = fmt.Sprintf("sessions_spawn of a short task from %d requesters in turn, isolated, no gateway (accept only)", spawnRequesters)
	r.ReplyBytes = replyBytes
	if err != nil {
		return r, err
	}
	return r, e.purgeSpawns(cctx)
}

// purgeSpawns removes what the children need to run: no later gateway may
// find them.
func (e *env) purgeSpawns(ctx context.Context) error {
	d := e.worker.Deps
	for _, name := range []string{d.Queue.Streams()[0], d.Runs.Streams()[0], d.Subagents.Streams()[0]} {
		st, err := e.js.Stream(ctx, name)
		if err != nil {
			return err
		}
		if err := st.Purge(ctx); err != nil {
			return fmt.Errorf("purge %s after spawn_accept: %w", name, err)
		}
	}
	return nil
}
