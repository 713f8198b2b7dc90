package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// withStamps is e's Ops reading a stamp table, stopped at the test's end.
func (e *env) withStamps() *Ops {
	e.t.Helper()
	o := *e.ops
	o.Stamps = NewStamps(o.Sessions, nil)
	e.t.Cleanup(o.Stamps.Stop)
	return &o
}

func (e *env) create(key string, at int64, edit func(*sessions.Entry)) {
	e.t.Helper()
	ent := &sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: at, UpdatedAt: at}
	if edit != nil {
		edit(ent)
	}
	if _, err := e.ops.Sessions.Create(e.ctx, ent); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) update(key string, fn func(*sessions.Entry)) {
	e.t.Helper()
	if _, _, err := e.ops.Sessions.Update(e.ctx, key, func(x *sessions.Entry) error { fn(x); return nil }); err != nil {
		e.t.Fatal(err)
	}
}

// sameReport runs a warn-mode pass through the table and one reading the
// bucket, and fails unless they report the same actions.
func sameReport(t *testing.T, table, bucket *Ops, p Maintenance) *Report {
	t.Helper()
	got, err := table.Maintain(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := bucket.Maintain(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Actions, want.Actions) {
		t.Fatalf("from the table %+v\nfrom the bucket %+v", got.Actions, want.Actions)
	}
	return got
}

// TestStampsFollowTheBucket: a pass through the table sees every write
// made before it (creates, updates, pins, deletes), and decides what a
// pass reading the bucket decides.
func TestStampsFollowTheBucket(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.ops.Now = func() time.Time { return now }
	table := e.withStamps()
	old := now.Add(-40 * day).UnixMilli()
	e.create("agent:main:stale", old, nil)
	e.create("agent:main:fresh", now.Add(-time.Hour).UnixMilli(), nil)
	e.create("agent:main:pinned", old, func(x *sessions.Entry) { x.Pinned = true })
	e.create("agent:main:running", old, func(x *sessions.Entry) { x.Status = "running" })
	e.create("agent:main:created-only", 0, func(x *sessions.Entry) { x.CreatedAt = old })
	p := Maintenance{PruneAfter: 30 * day, MaxEntries: 2}
	rep := sameReport(t, table, e.ops, p)
	if got := actionKeys(rep, ActionPrune); !slices.Equal(got, []string{"agent:main:created-only", "agent:main:stale"}) {
		t.Fatalf("prune %v", got)
	}
	// every kind of change, each seen by the very next pass
	e.update("agent:main:stale", func(x *sessions.Entry) { x.UpdatedAt = now.UnixMilli() })
	e.update("agent:main:pinned", func(x *sessions.Entry) { x.Pinned = false })
	if err := e.ops.Sessions.Delete(e.ctx, "agent:main:fresh"); err != nil {
		t.Fatal(err)
	}
	e.create("agent:main:new", now.UnixMilli(), nil)
	rep = sameReport(t, table, e.ops, p)
	if got := actionKeys(rep, ActionPrune); !slices.Equal(got, []string{"agent:main:created-only", "agent:main:pinned"}) {
		t.Fatalf("prune after the changes %v", got)
	}
	if got := actionKeys(rep, ActionCap); !slices.Equal(got, []string{"agent:main:new"}) {
		t.Fatalf("cap after the changes %v (running is protected, stale now the newest)", got)
	}
	// the table's own deletes, too
	if _, err := table.Maintain(e.ctx, Maintenance{Enforce: true, PruneAfter: 30 * day, MaxEntries: 100}); err != nil {
		t.Fatal(err)
	}
	e.deleted("agent:main:pinned")
	rep = sameReport(t, table, e.ops, p)
	if len(rep.Actions) != 1 || rep.Actions[0].Kind != ActionCap {
		t.Fatalf("after enforcing: %+v", rep.Actions)
	}
}

// TestStampsPassReadsNoBucket: once the table is loaded, a pass creates
// no consumer on the sessions bucket (the idle cost no longer grows with
// the store); a pass without the table reads the whole bucket through one.
func TestStampsPassReadsNoBucket(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	for i := range 50 {
		e.create(fmt.Sprintf("agent:main:s%02d", i), now.Add(-time.Duration(i)*time.Minute).UnixMilli(), nil)
	}
	nc := e.js.Conn()
	stream := bus.KVStream(e.ops.Sessions.KV().Bucket())
	// the JetStream API requests this connection sends and a marker share
	// one channel, in the order the server routed them
	ch := make(chan *nats.Msg, 4096)
	for _, subj := range []string{"$JS.API.CONSUMER.>", "lifecycle.test.mark"} {
		sub, err := nc.ChanSubscribe(subj, ch)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := Maintenance{PruneAfter: 30 * day, MaxEntries: 500}
	pass := func(o *Ops) int {
		t.Helper()
		if _, err := o.Maintain(e.ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish("lifecycle.test.mark", nil); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			select {
			case m := <-ch:
				if m.Subject == "lifecycle.test.mark" {
					return n
				}
				if strings.Contains(m.Subject, "CREATE."+stream) {
					n++
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the marker did not come back")
			}
		}
	}
	if n := pass(e.ops); n < 1 {
		t.Fatalf("a pass reading the bucket created %d consumers: the count sees none", n)
	}
	table := e.withStamps()
	if n := pass(table); n != 1 {
		t.Fatalf("the table's first pass created %d consumers, want its watch's 1", n)
	}
	for range 3 {
		if n := pass(table); n != 0 {
			t.Fatalf("a pass through the loaded table created %d consumers on the bucket", n)
		}
	}
}

// TestStampsBucketRecreated: a sessions bucket deleted and created again
// is read again from its start: the entries gone with the old one are gone
// from the table too.
func TestStampsBucketRecreated(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.ops.Now = func() time.Time { return now }
	table := e.withStamps()
	old := now.Add(-40 * day).UnixMilli()
	e.create("agent:main:gone", old, nil)
	p := Maintenance{PruneAfter: 30 * day, MaxEntries: 100}
	if rep := sameReport(t, table, e.ops, p); len(rep.Actions) != 1 {
		t.Fatalf("before: %+v", rep.Actions)
	}
	if err := e.js.DeleteKeyValue(e.ctx, e.ops.Sessions.KV().Bucket()); err != nil {
		t.Fatal(err)
	}
	store, err := sessions.Open(e.ctx, e.js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	e.ops.Sessions, table.Sessions = store, store
	e.create("agent:main:after", old, nil)
	rep := sameReport(t, table, e.ops, p)
	if got := actionKeys(rep, ActionPrune); !slices.Equal(got, []string{"agent:main:after"}) {
		t.Fatalf("after the bucket was created again: %v", got)
	}
}
