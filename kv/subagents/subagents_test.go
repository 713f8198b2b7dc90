package subagents

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

var ctx = bustest.Context

func open(t *testing.T) (*Registry, *Index) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	reg, err := Open(ctx(t), js, bus.NewNames(""))
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

// A record this process writes (a spawn's registry record) is applied by
// the watch from the record already in memory, not decoded again, and it
// carries no run request there, as a decoded one does not.
func TestIndexTakesOwnWriteWithoutDecoding(t *testing.T) {
	reg, ix := open(t)
	rec := child("agent:main:subagent:mine", "agent:main:main", "", 1)
	rec.Request = &runqueue.Request{RunID: rec.RunID, SessionKey: rec.ChildSessionKey, Message: "m"}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := reg.CreateAsync(rec)
	rev := bustest.Acked(t, f, err)
	if err := ix.WaitApplied(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	if v := reg.echo.Take(data); v != nil {
		t.Fatalf("the watch decoded the write instead of taking it: %+v is still held", v)
	}
	// a registry no index follows keeps what it wrote (bounded): the
	// record above was put, and taken by the watch
	other, err := Open(ctx(t), reg.js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	rec2 := child("agent:main:subagent:unwatched", "agent:main:main", "", 1)
	data2, _ := json.Marshal(rec2)
	if _, err := other.CreateAsync(rec2); err != nil {
		t.Fatal(err)
	}
	if v := other.echo.Take(data2); v == nil || v.ChildSessionKey != rec2.ChildSessionKey || v == rec2 {
		t.Fatalf("CreateAsync left %+v for the index, want a copy of the record", v)
	}
	got := ix.Get(rec.ChildSessionKey)
	want := *rec
	want.Request = nil
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("index holds %+v, want %+v", got, want)
	}
	if rec.Request == nil {
		t.Fatal("the caller's record lost its run request")
	}
	stored, _, err := reg.Get(ctx(t), rec.ChildSessionKey)
	if err != nil || stored.Request == nil || stored.Request.Message != "m" {
		t.Fatalf("stored record %+v %v", stored, err)
	}
}
