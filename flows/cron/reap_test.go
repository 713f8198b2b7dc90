package cron

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config/configtest"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestReaperRemovesOldRunSessions: run sessions past retention go (their
// transcripts archived), newer ones, the job's own session, other sessions
// and pinned runs stay; retention 0 keeps everything; of two gateways
// calling it within one interval, one works.
func TestReaperRemovesOldRunSessions(t *testing.T) {
	t.Run("bucket", func(t *testing.T) { testReaper(t, false) })
	t.Run("stamp table", func(t *testing.T) { testReaper(t, true) })
}

// testReaper runs the reaper over lifecycle Ops that read the bucket, or
// (table) the stamp table a gateway keeps.
func testReaper(t *testing.T, table bool) {
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	w := newWorker(t, s, cfg)
	ctx := bustest.Context(t)
	now := time.Now()
	old, fresh := now.Add(-48*time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()
	entries := map[string]int64{
		"agent:main:cron:j1:run:old1":  old,
		"agent:main:cron:j1:run:new1":  fresh,
		"agent:main:cron:j1":           old,
		"agent:main:main":              old,
		"agent:ops:cron:j2:run:old2":   old,
		"agent:ops:cron:j2:run:pinned": old,
	}
	for key, at := range entries {
		e := &sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: at, UpdatedAt: at, Pinned: key == "agent:ops:cron:j2:run:pinned"}
		if _, err := w.st.Sessions.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	life := lifecycle.New(w.st, nil)
	if table {
		life.Stamps = lifecycle.NewStamps(w.st.Sessions, nil)
		t.Cleanup(life.Stamps.Stop)
	}
	if got, err := (&Reaper{Life: life}).RunLeased(ctx, "g1", time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("retention 0 removed %v (%v)", got, err)
	}
	r := &Reaper{Life: life, Retention: 24 * time.Hour}
	removed, err := r.RunLeased(ctx, "g1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{"agent:main:cron:j1:run:old1", "agent:ops:cron:j2:run:old2"}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for key := range entries {
		_, _, err := w.st.Sessions.Get(ctx, key)
		gone := errors.Is(err, sessions.ErrNotFound)
		if gone != slices.Contains(removed, key) {
			t.Errorf("%s: gone=%v err=%v", key, gone, err)
		}
	}
	// the lease: a second gateway within the interval does nothing
	e := &sessions.Entry{Key: "agent:main:cron:j1:run:old3", AgentID: "main", SessionID: sessions.NewID(), CreatedAt: old, UpdatedAt: old}
	if _, err := w.st.Sessions.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got, err := r.RunLeased(ctx, "g2", time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("a second pass within the lease removed %v (%v)", got, err)
	}
}
