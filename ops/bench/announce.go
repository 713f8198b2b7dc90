package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/gateway"
)

// announce_latency: a child's run ends (its run record turns terminal) to
// its completion announce in the requester's transcript, both observed by
// the bench client as they arrive (a KV watch on the child's run record, a
// subscription on the requester's transcript subject). One gateway, script
// echo; sequential, the requester idle at each child's end. The span
// covers the gateway's finalize (child transcript tail, registry write),
// the SB_EVENTS publish and follow, the claim, the carrying run's queueing,
// and that run's first two waves up to its prompt.
func runAnnounceLatency(ctx context.Context, e *env) (Result, error) {
	stop, err := e.gateways(ctx, 1, 0, gateway.DefaultConcurrency)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	d := e.worker.Deps
	stores := spawns.Stores{Registry: d.Subagents, Sessions: d.Store, Queue: d.Queue, Runs: d.Runs}
	const requester = "agent:main:main"
	prompts := make(chan string, 64) // run ids of prompts appended to the requester's transcript
	sub, err := e.nc.Subscribe(e.names.Transcript(bus.EncodeKey(requester)), func(m *nats.Msg) {
		var v struct {
			Marker *struct{ Run, Part string } `json:"__sessionbus"`
		}
		if json.Unmarshal(m.Data, &v) == nil && v.Marker != nil && v.Marker.Part == "prompt" {
			prompts <- v.Marker.Run
		}
	})
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		return Result{}, err
	}
	kv := d.Runs.KV()
	op := func() (time.Duration, error) {
		octx, cancel := opCtx(ctx)
		defer cancel()
		// the child's run id is known only after the spawn: watch every
		// run record and pick the child's terminal one
		w, err := kv.WatchAll(octx, jetstream.UpdatesOnly())
		if err != nil {
			return 0, err
		}
		defer func() { _ = w.Stop() }()
		c, err := spawns.Spawn(octx, stores, spawns.Child{Requester: requester, Agent: "main", Task: "bench"})
		if err != nil {
			return 0, err
		}
		var ended time.Time
		for ended.IsZero() {
			select {
			case en := <-w.Updates():
				if en == nil || en.Key() != c.RunID {
					continue
				}
				var r struct{ Status string }
				if json.Unmarshal(en.Value(), &r) == nil && (r.Status == "ok" || r.Status == "error" || r.Status == "timeout") {
					ended = time.Now()
				}
			case <-octx.Done():
				return 0, fmt.Errorf("child run %s never ended", c.RunID)
			}
		}
		want := gateway.AnnounceRunID(c.RunID)
		for {
			select {
			case run := <-prompts:
				if run != want {
					continue
				}
				span := time.Since(ended)
				// let the requester's turn finish: the next child finds it idle
				if _, err := d.Runs.Wait(octx, want); err != nil {
					return 0, fmt.Errorf("announce run %s: %w", want, err)
				}
				return span, nil
			case <-octx.Done():
				return 0, fmt.Errorf("announce of %s never reached the requester", c.RunID)
			}
		}
	}
	r, err := measureSpans(ctx, e.sz.sn, op)
	r.Dataset = "child run end to its announce prompt in the requester's transcript; 1 gateway, script echo, requester idle"
	return r, err
}
