package handlers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

var errCrash = errors.New("injected crash")

// A crash between any two creation steps leaves a state that the
// completion a gateway's sweep runs (spawns.Complete) turns into a
// whole spawn: afterwards no child without a run and no run without a
// child, each run queued exactly once. Each case names the steps that
// "crashed" (did not happen); the rest did.
func TestSpawnCrashBetweenSteps(t *testing.T) {
	for _, c := range []struct {
		name    string
		skip    []string // steps the crash prevented
		fork    bool
		nothing bool // the crash came before the commit point: nothing exists
	}{
		{name: "before transcript", skip: []string{handlers.SpawnStepTranscript}, fork: true, nothing: true},
		{name: "transcript then crash", skip: []string{handlers.SpawnStepRegistry}, fork: true, nothing: true},
		{name: "before registry", skip: []string{handlers.SpawnStepRegistry}, nothing: true},
		{name: "registry only", skip: []string{handlers.SpawnStepEntry, handlers.SpawnStepRunRecord}},
		{name: "registry and entry", skip: []string{handlers.SpawnStepRunRecord}},
		{name: "registry and run, no entry", skip: []string{handlers.SpawnStepEntry}},
		{name: "run record not published", skip: []string{handlers.SpawnStepPublish}},
		{name: "run record not published, no entry", skip: []string{handlers.SpawnStepEntry, handlers.SpawnStepPublish}},
		{name: "no crash", skip: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spawnStack(t, nil)
			d := s.Worker.Deps
			d.SpawnHook = func(step string) error {
				for _, x := range c.skip {
					if x == step {
						return errCrash
					}
				}
				return nil
			}
			params := `{"task":"x","idempotencyKey":"k"}`
			if c.fork {
				params = `{"task":"x","idempotencyKey":"k","context":"fork"}`
				s.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":"context"}`)
			}
			_, err := s.Call(mainKey, "sessions_spawn", params)
			if (err != nil) != (len(c.skip) > 0) {
				t.Fatalf("spawn: %v", err)
			}
			d.SpawnHook = nil
			ctx := bustestCtx(t)
			if err := d.Children.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			// the sweep: complete every registered child not known queued
			var recs []*subagents.Record
			d.Children.Each(func(r *subagents.Record) bool { recs = append(recs, r); return true })
			for _, r := range recs {
				for range 2 { // idempotent: twice changes nothing
					if err := spawns.Complete(ctx, d.Subagents, d.Store, d.Runs, d.Queue, r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.nothing {
				if len(recs) != 0 {
					t.Fatalf("a crash before the commit point left %d records", len(recs))
				}
			} else if len(recs) != 1 {
				t.Fatalf("%d registry records, want 1", len(recs))
			}
			if err := d.Index.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			// the invariant, both ways
			children := d.Index.Children(mainKey)
			reqs := runRequests(t, s)
			if len(children) != len(recs) || len(reqs) != len(recs) {
				t.Fatalf("%d children, %d queued runs, %d records", len(children), len(reqs), len(recs))
			}
			for _, e := range children {
				rec, _, err := d.Subagents.Get(ctx, e.Key)
				if err != nil {
					t.Fatalf("child %s without a registry record: %v", e.Key, err)
				}
				rr, _, err := d.Runs.Get(ctx, rec.RunID)
				if err != nil || rr.Status != runs.Pending || rr.SessionKey != e.Key {
					t.Fatalf("child %s without its run: %+v %v", e.Key, rr, err)
				}
				if !rec.Queued {
					t.Fatalf("completed record not marked queued")
				}
			}
			for _, r := range reqs {
				if _, _, err := d.Store.Get(ctx, r.SessionKey); errors.Is(err, sessions.ErrNotFound) {
					t.Fatalf("run %s without a child", r.RunID)
				}
			}
			// a retry after the crash returns the same ids and adds nothing
			if !c.nothing {
				before := writeCounts(t, s)
				res := s.MustCall(mainKey, "sessions_spawn", params)
				if res["childSessionKey"] != recs[0].ChildSessionKey || res["runId"] != recs[0].RunID {
					t.Fatalf("retry %v", res)
				}
				sameCounts(t, before, writeCounts(t, s), "a retry")
			}
			if c.fork && c.nothing && c.skip[0] == handlers.SpawnStepRegistry {
				// the seeded transcript of a spawn that never committed is
				// kept, once, by the retry
				res := s.MustCall(mainKey, "sessions_spawn", params)
				n, err := d.Transcripts.Count(ctx, bus.EncodeKey(res["childSessionKey"].(string)))
				if err != nil || n != 1 {
					t.Fatalf("fork copy after retry: %d entries, %v", n, err)
				}
			}
		})
	}
}

// The four creation writes go out in one wave, so when the server refuses
// the registry record (here: its key holds a delete marker, which a plain
// create does not write over) the entry, run record and run request behind
// it may land. The spawn then answers an error and undoes them: the run is
// ended before anyone takes it and the entry it created is gone, so no run
// goes ahead without a child record.
func TestSpawnRegistryRefusedUndoesTheWave(t *testing.T) {
	s := spawnStack(t, nil)
	d := s.Worker.Deps
	ctx := bustestCtx(t)
	childKey := "agent:main:subagent:" + bus.DerivedUUID("sessionbus/sessions_spawn/child", mainKey, "refused")
	runID := bus.DerivedUUID("sessionbus/sessions_spawn/run", mainKey, "refused")
	if _, err := d.Subagents.Create(ctx, &subagents.Record{RunID: "old", ChildSessionKey: childKey, RequesterSessionKey: mainKey}); err != nil {
		t.Fatal(err)
	}
	if err := d.Subagents.Delete(ctx, childKey); err != nil {
		t.Fatal(err)
	}
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","idempotencyKey":"refused"}`)
	if res["status"] != "error" || !strings.HasPrefix(res["error"].(string), "Failed to register subagent run: ") {
		t.Fatalf("spawn over a refused registry write: %v", res)
	}
	rr, _, err := d.Runs.Get(ctx, runID)
	if err != nil || rr.Status != runs.Error || !strings.Contains(rr.Error, "never registered") {
		t.Fatalf("the run behind the refused record: %+v %v", rr, err)
	}
	if _, _, err := d.Store.Get(ctx, childKey); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("the entry behind the refused record stays: %v", err)
	}
}
