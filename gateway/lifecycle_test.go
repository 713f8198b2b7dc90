package gateway

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// TestArchiveDue: only an ended run-mode child with cleanup "delete" gets
// an archive time (OpenClaw's code, §5.5), spawn time + archiveAfter; a
// run still going, or an announce on its way, waits; 0 disables.
func TestArchiveDue(t *testing.T) {
	created := time.UnixMilli(1_000_000)
	after := time.Hour
	ended := func(mut func(*subagents.Record)) *subagents.Record {
		c := &subagents.Record{Cleanup: "delete", SpawnMode: "run", CreatedAt: created.UnixMilli(), EndedAt: created.UnixMilli() + 1,
			Announce: &subagents.Announce{State: subagents.AnnounceFailed}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	due, early := created.Add(after), created.Add(after-time.Millisecond)
	for name, tc := range map[string]struct {
		c     *subagents.Record
		after time.Duration
		at    time.Time
		want  bool
	}{
		"due":              {ended(nil), after, due, true},
		"not yet":          {ended(nil), after, early, false},
		"disabled":         {ended(nil), 0, due.Add(time.Hour), false},
		"negative":         {ended(nil), -time.Minute, due, false},
		"keep":             {ended(func(c *subagents.Record) { c.Cleanup = "keep" }), after, due, false},
		"already deleted":  {ended(func(c *subagents.Record) { c.Deleted = true }), after, due, false},
		"running":          {ended(func(c *subagents.Record) { c.EndedAt = 0 }), after, due, false},
		"announce pending": {ended(func(c *subagents.Record) { c.Announce.State = subagents.AnnouncePending }), after, due, false},
		"announce queued":  {ended(func(c *subagents.Record) { c.Announce.State = subagents.AnnounceQueued }), after, due, false},
		"no announce":      {ended(func(c *subagents.Record) { c.Announce = nil }), after, due, true},
	} {
		if got := archiveDue(tc.c, tc.after, tc.at); got != tc.want {
			t.Errorf("%s: archiveDue = %v, want %v", name, got, tc.want)
		}
	}
}

// TestChildCleanupDeleteArchives: cleanup "delete" archives the child's
// transcript before its session goes.
func TestChildCleanupDeleteArchives(t *testing.T) {
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "skip this", Cleanup: "delete"})
	e.waitChild(c.ChildSessionKey, "child deleted", func(r *subagents.Record) bool { return r.Deleted })
	ctx := bustest.Context(t)
	m, err := e.g.life.Archives.Find(ctx, c.ChildSessionKey)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := e.g.life.Archives.Read(ctx, m.ID, &got); err != nil {
		t.Fatal(err)
	}
	if m.Reason != archives.ReasonDeleted || m.State != archives.StateDone || m.Entries < 2 || !strings.Contains(got.String(), "skip this") {
		t.Fatalf("archive %+v: %s", m, got.String())
	}
}

// TestChildArchiveAfter: a gateway's sweep archives and deletes an ended
// cleanup-"delete" child whose announce gave up, once spawn time +
// archiveAfterMinutes has passed.
func TestChildArchiveAfter(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	key := "agent:kid:subagent:stale"
	if _, err := e.g.store.Create(ctx, &sessions.Entry{Key: key, AgentID: "kid", SessionID: "sid-stale"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tr.Append(ctx, bus.EncodeKey(key), []byte(`{"role":"user","content":"old work"}`)); err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(-61 * time.Minute).UnixMilli()
	if _, err := e.g.reg.Create(ctx, &subagents.Record{RunID: "run-stale", ChildSessionKey: key, ChildAgentID: "kid", Cleanup: "delete", SpawnMode: "run",
		RequesterSessionKey: "agent:req:main", ControllerSessionKey: "agent:req:main", CreatedAt: created, StartedAt: created, EndedAt: created + 1,
		Outcome: subagents.OutcomeOK, Announce: &subagents.Announce{State: subagents.AnnounceFailed, At: created + 2}}); err != nil {
		t.Fatal(err)
	}
	e.waitChild(key, "stale child archived", func(r *subagents.Record) bool { return r.Deleted })
	m, err := e.g.life.Archives.Find(ctx, key)
	if err != nil || m.Reason != archives.ReasonArchived || m.State != archives.StateDone || m.Entries != 1 || m.SessionID != "sid-stale" {
		t.Fatalf("archive %+v %v", m, err)
	}
	if _, _, err := e.g.store.Get(ctx, key); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("entry left: %v", err)
	}
}
