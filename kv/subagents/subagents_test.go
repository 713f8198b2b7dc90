package subagents

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = bustest.Context

func open(t *testing.T) (*Registry, *Index) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	reg, err := Open(ctx(t), js, bus.NewNames(""), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := StartIndex(ctx(t), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	return reg, ix
}

func child(key, requester, controller string, created int64) *Record {
	return &Record{
		RunID: "run-" + key, ChildSessionKey: key, ChildAgentID: "main",
		RequesterSessionKey: requester, ControllerSessionKey: controller,
		Task: "t", Cleanup: "keep", SpawnMode: "run", Runtime: "subagent", CreatedAt: created,
	}
}

func TestCreateGetUpdateDelete(t *testing.T) {
	reg, _ := open(t)
	rec := child("agent:main:subagent:a", "agent:main:main", "", 1)
	if _, err := reg.Create(ctx(t), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Create(ctx(t), rec); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, _, err := reg.Get(ctx(t), rec.ChildSessionKey)
	if err != nil || got.RunID != rec.RunID || !got.Active() {
		t.Fatalf("get: %+v %v", got, err)
	}
	upd, err := reg.Update(ctx(t), rec.ChildSessionKey, func(r *Record) error {
		r.EndedAt, r.Outcome = 5, OutcomeOK
		r.Announce = &Announce{State: AnnouncePending}
		return nil
	})
	if err != nil || upd.Active() || upd.Announce.State != AnnouncePending {
		t.Fatalf("update: %+v %v", upd, err)
	}
	// an unchanged update writes nothing
	same, err := reg.Update(ctx(t), rec.ChildSessionKey, func(*Record) error { return record.ErrUnchanged })
	if err != nil || same.Outcome != OutcomeOK {
		t.Fatalf("unchanged update: %+v %v", same, err)
	}
	if _, err := reg.Update(ctx(t), "agent:main:subagent:none", func(*Record) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing child: %v, want ErrNotFound", err)
	}
	if err := reg.Delete(ctx(t), rec.ChildSessionKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Get(ctx(t), rec.ChildSessionKey); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
}

func TestIndexFollowsControllersAndActivity(t *testing.T) {
	reg, ix := open(t)
	parent, orch := "agent:main:main", "agent:main:subagent:orch"
	for _, r := range []*Record{
		child("agent:main:subagent:a", parent, "", 1),
		child("agent:main:subagent:b", parent, parent, 2),
		child("agent:main:subagent:c", orch, "", 3),
		// requested by parent, controlled by orch: listed under both keys,
		// but controlled by orch only
		child("agent:main:subagent:d", parent, orch, 4),
	} {
		if _, err := reg.Create(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Update(ctx(t), "agent:main:subagent:a", func(r *Record) error { r.EndedAt = 9; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := ix.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	keys := func(rs []*Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.ChildSessionKey)
		}
		return out
	}
	if got := keys(ix.Controlled(parent)); len(got) != 2 || got[0] != "agent:main:subagent:b" || got[1] != "agent:main:subagent:a" {
		t.Fatalf("controlled by parent (newest first) = %v", got)
	}
	if got := keys(ix.Controlled(orch)); len(got) != 2 || got[0] != "agent:main:subagent:d" || got[1] != "agent:main:subagent:c" {
		t.Fatalf("controlled by orch = %v", got)
	}
	// active children of a requester: b and d (a ended)
	if n := ix.ActiveChildren(parent); n != 2 {
		t.Fatalf("active children of parent = %d, want 2", n)
	}
	if ix.Get("agent:main:subagent:a").EndedAt != 9 {
		t.Fatal("index did not apply the update")
	}
	// a delete leaves every list
	if err := reg.Delete(ctx(t), "agent:main:subagent:d"); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 5*time.Second, "the index drops a deleted child", func() bool {
		return ix.Get("agent:main:subagent:d") == nil && len(ix.Controlled(orch)) == 1 && ix.ActiveChildren(parent) == 1
	})
	n := 0
	ix.Each(func(*Record) bool { n++; return true })
	if n != 3 {
		t.Fatalf("Each saw %d records, want 3", n)
	}
}

// A record this process writes with its index (a spawn's registry record)
// is applied by the watch from the record already in memory, not decoded
// again; only the exact bytes written are taken so, and a write failing
// or a different write under the key leaves the index as decoding would.
func TestIndexAppliesExpectedWriteWithoutDecoding(t *testing.T) {
	reg, ix := open(t)
	rec := child("agent:main:subagent:mine", "agent:main:main", "", 1)
	rec.Request = &runqueue.Request{RunID: rec.RunID, SessionKey: rec.ChildSessionKey, Message: "m"}
	f, forget, err := reg.CreateAsync(rec, ix)
	if err != nil {
		t.Fatal(err)
	}
	ix.mu.RLock()
	want := ix.expected[rec.ChildSessionKey].rec
	ix.mu.RUnlock()
	if want == nil || want.Request != nil || rec.Request == nil {
		t.Fatalf("expected record %+v (the index holds none with a run request; the caller's keeps it)", want)
	}
	var rev uint64
	select {
	case a := <-f.Ok():
		rev = a.Sequence
	case err := <-f.Err():
		t.Fatal(err)
	}
	if err := ix.WaitApplied(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	if got := ix.Get(rec.ChildSessionKey); got != want {
		t.Fatalf("the watch applied %p %+v, want the expected record %p", got, got, want)
	}
	forget() // after the watch took it: nothing left to withdraw
	ix.mu.RLock()
	n := len(ix.expected)
	ix.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d expectations left after the watch applied the write", n)
	}
	if ix.ActiveChildren("agent:main:main") != 1 {
		t.Fatalf("active children %d", ix.ActiveChildren("agent:main:main"))
	}

	// other bytes under an expected key: decoded, as always
	other := child("agent:main:subagent:other", "agent:main:main", "", 2)
	stale := *other
	stale.Task = "not what was written"
	data, err := json.Marshal(&stale)
	if err != nil {
		t.Fatal(err)
	}
	ix.Expect(&stale, data)
	rev, err = reg.Create(ctx(t), other)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitApplied(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	if got := ix.Get(other.ChildSessionKey); got == nil || got.Task != "t" {
		t.Fatalf("index holds %+v, want the record as stored", got)
	}

	// a withdrawn expectation is gone; a newer one of the key stays
	forget1 := ix.Expect(rec, []byte("a"))
	ix.Expect(rec, []byte("b"))
	forget1()
	ix.mu.RLock()
	x, ok := ix.expected[rec.ChildSessionKey]
	ix.mu.RUnlock()
	if !ok || string(x.data) != "b" {
		t.Fatalf("forget of an older expectation removed the newer one: %v %q", ok, x.data)
	}
}
