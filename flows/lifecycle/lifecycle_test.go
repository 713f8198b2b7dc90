package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// env is one deployment's stores on a fresh embedded server.
type env struct {
	url   string
	creds string // for a process of the test's to connect with
	t     *testing.T
	ctx   context.Context
	js    jetstream.JetStream
	ops   *Ops
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	ops := &Ops{JS: js}
	var err error
	if ops.Sessions, err = sessions.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if ops.Transcripts, err = transcripts.Open(ctx, nc, js, names); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ops.Transcripts.Close)
	if ops.Archives, err = archives.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if ops.Signals, err = signals.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if ops.Watchers, err = watchers.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if ops.Claims, err = claims.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	return &env{url: s.URL(), creds: bustest.CredsFile(t, s.Deployment()), t: t, ctx: ctx, js: js, ops: ops}
}

// fresh is another process's Ops over the same stores, with a clock past
// every pending archive's grace: what the next sweep sees.
func (e *env) fresh() *Ops {
	o := *e.ops
	o.BeforeStep = nil
	o.Now = func() time.Time { return time.Now().Add(2 * DefaultPendingGrace) }
	return &o
}

// session creates a session with n transcript entries, a signal event, a
// cursor where it watches another and one where another watches it.
func (e *env) session(key string, n int, updatedAt int64) (*sessions.Entry, [][]byte) {
	e.t.Helper()
	ent := &sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), Label: "label of " + key, UpdatedAt: updatedAt, TotalTokens: 99}
	if _, err := e.ops.Sessions.Create(e.ctx, ent); err != nil {
		e.t.Fatal(err)
	}
	entries := archives.SampleEntries(n, uint64(len(key)))
	for i := 0; i < len(entries); i += transcripts.MaxBatch {
		if _, err := e.ops.Transcripts.Append(e.ctx, bus.EncodeKey(key), entries[i:min(i+transcripts.MaxBatch, len(entries))]...); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, _, err := e.ops.Signals.Append(e.ctx, signals.Event{SessionKey: key, AgentID: "main", Kind: signals.KindHumanDirectMessage,
		ActorType: signals.ActorHuman, DedupeKey: "m." + key, Summary: "direct message"}); err != nil {
		e.t.Fatal(err)
	}
	for _, c := range [][2]string{{key, "agent:main:other"}, {"agent:main:parent", key}} {
		if _, err := e.ops.Watchers.Seed(e.ctx, c[0], c[1], 0, "test"); err != nil {
			e.t.Fatal(err)
		}
	}
	return ent, entries
}

func (e *env) count(key string) uint64 {
	n, err := e.ops.Transcripts.Count(e.ctx, bus.EncodeKey(key))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) cursor(watcher, target string) bool {
	_, err := e.ops.Watchers.Get(e.ctx, watcher, target)
	return err == nil
}

// archived checks the key's archives: exactly one, done, holding entries
// byte for byte, of sessionId.
func (e *env) archived(key, sessionID, reason string, entries [][]byte) *archives.Meta {
	e.t.Helper()
	all, err := e.ops.Archives.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var mine []*archives.Meta
	for _, m := range all {
		if m.Key == key {
			mine = append(mine, m)
		}
	}
	if len(mine) != 1 || mine[0].State != archives.StateDone || mine[0].SessionID != sessionID || mine[0].Reason != reason {
		for _, m := range mine {
			e.t.Logf("archive %+v", *m)
		}
		e.t.Fatalf("%s: want one done %s archive of %s, got %d", key, reason, sessionID, len(mine))
	}
	var got bytes.Buffer
	if _, err := e.ops.Archives.Read(e.ctx, mine[0].ID, &got); err != nil {
		e.t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), archives.JSONL(entries)) {
		e.t.Fatalf("%s: archive holds %d bytes, transcript was %d: not identical", key, got.Len(), len(archives.JSONL(entries)))
	}
	return mine[0]
}

// deleted checks that nothing of key is left but its archive.
func (e *env) deleted(key string) {
	e.t.Helper()
	if _, _, err := e.ops.Sessions.Get(e.ctx, key); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("%s: entry still there (%v)", key, err)
	}
	if n := e.count(key); n != 0 {
		e.t.Fatalf("%s: %d transcript entries left", key, n)
	}
	if v, err := e.ops.Signals.StateVersion(e.ctx, key); err != nil || v != 0 {
		e.t.Fatalf("%s: signal head %d %v left", key, v, err)
	}
	if e.cursor(key, "agent:main:other") || e.cursor("agent:main:parent", key) {
		e.t.Fatalf("%s: watch cursors left", key)
	}
}

// wasReset checks key is a new incarnation of old: new sessionId, empty
// transcript, no cursors as watcher, its cursor as target and its signal
// head kept, its settings kept.
func (e *env) wasReset(key string, old *sessions.Entry) *sessions.Entry {
	e.t.Helper()
	cur, _, err := e.ops.Sessions.Get(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	if cur.SessionID == old.SessionID || cur.SessionID == "" || cur.Label != old.Label || cur.TotalTokens != 0 {
		e.t.Fatalf("%s after reset: %+v", key, cur)
	}
	if n := e.count(key); n != 0 {
		e.t.Fatalf("%s: %d transcript entries after reset", key, n)
	}
	if e.cursor(key, "agent:main:other") || !e.cursor("agent:main:parent", key) {
		e.t.Fatalf("%s: reset must drop the cursors it holds as watcher only", key)
	}
	if v, err := e.ops.Signals.StateVersion(e.ctx, key); err != nil || v == 0 {
		e.t.Fatalf("%s: signal head %d %v: a reset keeps it (monotonic)", key, v, err)
	}
	return cur
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	old, entries := e.session("agent:main:gone", 1500, 1)
	e.session("agent:main:kept", 3, 2)
	res, err := e.ops.Delete(e.ctx, "agent:main:gone", archives.ReasonDeleted, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 1500 || res.SessionID != old.SessionID {
		t.Fatalf("result %+v", res)
	}
	e.deleted("agent:main:gone")
	e.archived("agent:main:gone", old.SessionID, archives.ReasonDeleted, entries)
	if e.count("agent:main:kept") != 3 || !e.cursor("agent:main:kept", "agent:main:other") {
		t.Fatal("another session was touched")
	}
}

func TestReset(t *testing.T) {
	e := newEnv(t)
	old, entries := e.session("agent:main:r", 20, 1)
	res, err := e.ops.Reset(e.ctx, "agent:main:r", nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := e.wasReset("agent:main:r", old)
	if res.NewSessionID != cur.SessionID {
		t.Fatalf("result %+v, entry %s", res, cur.SessionID)
	}
	e.archived("agent:main:r", old.SessionID, archives.ReasonReset, entries)
}

// TestBadInput: a malformed or unknown key is refused with a clear error
// and nothing changes.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.session("agent:main:x", 2, 1)
	for key, code := range map[string]int{"": bus.CodeBadRequest, "agent:main:a b": bus.CodeBadRequest, "agent:main:..": bus.CodeBadRequest, "agent:main:nobody": bus.CodeNotFound, "agent:main:googlechat:group:spaces/none": bus.CodeNotFound} {
		for _, op := range []func() error{
			func() error { _, err := e.ops.Delete(e.ctx, key, archives.ReasonDeleted, nil); return err },
			func() error { _, err := e.ops.Reset(e.ctx, key, nil); return err },
		} {
			err := op()
			if be, ok := bus.AsError(err); !ok || be.Code != code {
				t.Fatalf("%q: %v, want code %d", key, err, code)
			}
		}
	}
	if all, _ := e.ops.Archives.List(e.ctx); len(all) != 0 {
		t.Fatalf("%d archives written by refused operations", len(all))
	}
	if e.count("agent:main:x") != 2 {
		t.Fatal("a refused operation changed a session")
	}
}

var errCrash = errors.New("test: crashed here")

// TestCrashAtEachStep stops delete, reset and archive-after at each step,
// as a crash would, then lets another process's sweep finish: nothing is
// lost (one archive, byte-identical) and nothing is left half done.
func TestCrashAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	steps := []string{StepArchive, StepCursors, StepSignals, StepTranscript, StepEntry, StepDone}
	for _, reason := range []string{archives.ReasonDeleted, archives.ReasonReset, archives.ReasonArchived} {
		for _, step := range steps {
			t.Run(reason+"/"+step, func(t *testing.T) {
				e := newEnv(t)
				key := "agent:main:crash"
				old, entries := e.session(key, 1200, 1)
				e.ops.BeforeStep = func(_, s string) error {
					if s == step {
						return errCrash
					}
					return nil
				}
				var err error
				if reason == archives.ReasonReset {
					_, err = e.ops.Reset(e.ctx, key, nil)
				} else {
					_, err = e.ops.Delete(e.ctx, key, reason, nil)
				}
				if !errors.Is(err, errCrash) {
					t.Fatalf("operation: %v", err)
				}
				// a sweep within the grace leaves the operation alone (its
				// process may still be at work)
				if n, err := e.ops.Finish(e.ctx); n != 0 || err != nil {
					t.Fatalf("sweep within grace: %d %v", n, err)
				}
				n, err := e.fresh().Finish(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				if step == StepArchive {
					// stopped before anything was written: untouched
					if n != 0 || e.count(key) != 1200 {
						t.Fatalf("finished %d; %d entries", n, e.count(key))
					}
					if all, _ := e.ops.Archives.List(e.ctx); len(all) != 0 {
						t.Fatalf("%d archives", len(all))
					}
					return
				}
				if n != 1 {
					t.Fatalf("sweep finished %d operations, want 1", n)
				}
				e.archived(key, old.SessionID, reason, entries)
				if reason == archives.ReasonReset {
					e.wasReset(key, old)
				} else {
					e.deleted(key)
				}
				if n, err := e.fresh().Finish(e.ctx); n != 0 || err != nil {
					t.Fatalf("second sweep: %d %v", n, err)
				}
			})
		}
	}
}

// TestCrashThenGrowth: entries appended to a session after its archive
// was written and before the sweep finishes are archived too, never
// removed unarchived.
func TestCrashThenGrowth(t *testing.T) {
	e := newEnv(t)
	key := "agent:main:grow"
	_, entries := e.session(key, 10, 1)
	e.ops.BeforeStep = func(_, s string) error {
		if s == StepCursors {
			return errCrash
		}
		return nil
	}
	if _, err := e.ops.Delete(e.ctx, key, archives.ReasonDeleted, nil); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	more := []byte(`{"role":"user","content":"late"}`)
	if _, err := e.ops.Transcripts.Append(e.ctx, bus.EncodeKey(key), more); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fresh().Finish(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.deleted(key)
	all, _ := e.ops.Archives.List(e.ctx)
	if len(all) != 2 || all[0].State != archives.StateDone || all[1].State != archives.StateDone {
		t.Fatalf("want the first archive and a whole second one, both done: %d", len(all))
	}
	var got bytes.Buffer
	if _, err := e.ops.Archives.Read(e.ctx, all[1].ID, &got); err != nil {
		t.Fatal(err)
	}
	if want := archives.JSONL(append(entries, more)); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("second archive %d bytes, want %d", got.Len(), len(want))
	}
}

func TestRestore(t *testing.T) {
	e := newEnv(t)
	key := "agent:main:back"
	old, entries := e.session(key, 2100, 1)
	if _, err := e.ops.Restore(e.ctx, key, nil); err == nil {
		t.Fatal("restore with no archive")
	}
	res, err := e.ops.Delete(e.ctx, key, archives.ReasonDeleted, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.session("agent:main:other-live", 1, 1)
	var progress []int
	r, err := e.ops.Restore(e.ctx, res.ArchiveID, func(n int) { progress = append(progress, n) })
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := e.ops.Sessions.Get(e.ctx, key)
	if err != nil || cur.SessionID != r.NewSessionID || cur.SessionID == old.SessionID || cur.Label != old.Label || len(progress) == 0 {
		t.Fatalf("restored entry %+v %v (progress %v)", cur, err, progress)
	}
	have, err := e.ops.Transcripts.Read(e.ctx, bus.EncodeKey(key), 0, 10_000)
	if err != nil || len(have) != len(entries) {
		t.Fatalf("restored %d entries, want %d (%v)", len(have), len(entries), err)
	}
	for i := range have {
		if !bytes.Equal(have[i].Data, entries[i]) {
			t.Fatalf("entry %d differs", i)
		}
	}
	// onto a live session: refused, nothing changed
	_, err = e.ops.Restore(e.ctx, key, nil)
	if be, ok := bus.AsError(err); !ok || be.Code != bus.CodeBadRequest {
		t.Fatalf("restore onto live: %v", err)
	}
	if e.count(key) != uint64(len(entries)) {
		t.Fatal("refused restore changed the transcript")
	}
	if _, err := e.ops.Restore(e.ctx, "agent:main:never", nil); !errors.Is(err, archives.ErrNotFound) && !bustest.IsCode(err, bus.CodeNotFound) {
		t.Fatalf("restore unknown: %v", err)
	}
}

// TestRestoreCorrupt: a corrupt archive restores nothing.
func TestRestoreCorrupt(t *testing.T) {
	e := newEnv(t)
	key := "agent:main:bad"
	e.session(key, 50, 1)
	res, err := e.ops.Delete(e.ctx, key, archives.ReasonDeleted, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs, _ := e.js.ObjectStore(e.ctx, "archives")
	info, _ := obs.GetInfo(e.ctx, res.ArchiveID)
	raw, _ := obs.GetBytes(e.ctx, res.ArchiveID)
	if _, err := obs.Put(e.ctx, jetstream.ObjectMeta{Name: res.ArchiveID, Metadata: info.Metadata}, bytes.NewReader(raw[:len(raw)-7])); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Restore(e.ctx, key, nil); !errors.Is(err, archives.ErrCorrupt) {
		t.Fatalf("restore of a truncated archive: %v", err)
	}
	if _, _, err := e.ops.Sessions.Get(e.ctx, key); !errors.Is(err, sessions.ErrNotFound) || e.count(key) != 0 {
		t.Fatal("a failed restore wrote something")
	}
}

// TestEvictionOrder: with a tiny budget the oldest archives go first, and
// live sessions (least recently updated first) only when no archive is
// left; pending archives never.
func TestEvictionOrder(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := range 3 {
		key := fmt.Sprintf("agent:main:old%d", i)
		e.session(key, 200, int64(i))
		res, err := e.ops.Delete(e.ctx, key, archives.ReasonDeleted, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ArchiveID)
	}
	e.session("agent:main:live-newer", 200, 2000)
	e.session("agent:main:live-older", 200, 1000)
	b, all, err := e.ops.State(e.ctx, 1<<40, true)
	if err != nil || len(all) != 3 || b.Over {
		t.Fatal(b, err)
	}
	// just over by less than the oldest archive: only it goes
	ev, err := e.ops.Enforce(e.ctx, b.Used-1, b.Used-1)
	if err != nil || len(ev) != 1 || ev[0].ID != ids[0] {
		t.Fatalf("evicted %+v %v, want the oldest archive", ev, err)
	}
	// a budget below the live transcripts: every archive, then the least
	// recently updated live session, and so on
	ev, err = e.ops.Enforce(e.ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, x := range ev {
		order = append(order, x.Kind+":"+x.Key)
	}
	want := []string{"archive:agent:main:old1", "archive:agent:main:old2", "session:agent:main:live-older"}
	if len(order) < 4 || fmt.Sprint(order[:3]) != fmt.Sprint(want) || order[3] != "archive:agent:main:live-older" {
		t.Fatalf("eviction order %v, want %v then the evicted session's own archive", order, want)
	}
	if _, _, err := e.ops.Sessions.Get(e.ctx, "agent:main:live-older"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatal("live-older kept")
	}
	// a disabled budget (malformed value) evicts nothing
	b, _, _ = e.ops.State(e.ctx, 0, false)
	if b.Over || b.Enabled {
		t.Fatalf("disabled budget: %+v", b)
	}
}

// TestEvictionSparesPending: an archive whose operation is unfinished is
// that operation's record, and never evicted.
func TestEvictionSparesPending(t *testing.T) {
	e := newEnv(t)
	e.session("agent:main:p", 100, 1)
	e.ops.BeforeStep = func(_, s string) error {
		if s == StepTranscript {
			return errCrash
		}
		return nil
	}
	if _, err := e.ops.Delete(e.ctx, "agent:main:p", archives.ReasonDeleted, nil); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	e.ops.BeforeStep = nil
	if _, err := e.ops.Enforce(e.ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	all, _ := e.ops.Archives.List(e.ctx)
	if len(all) == 0 || all[0].Key != "agent:main:p" || all[0].State != archives.StatePending {
		t.Fatalf("pending archive evicted: %v", all)
	}
	if _, err := e.ops.Archives.Read(e.ctx, all[0].ID, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentDeletes: two processes deleting one session at once make
// one archive, with every entry; the other is refused as busy (or finds
// the session gone), never archiving what the first already removed.
func TestConcurrentDeletes(t *testing.T) {
	e := newEnv(t)
	key := "agent:main:twice"
	old, entries := e.session(key, 500, 1)
	other := e.fresh()
	other.Now = nil
	errs := make(chan error, 2)
	for _, o := range []*Ops{e.ops, other} {
		go func() {
			_, err := o.Delete(e.ctx, key, archives.ReasonDeleted, nil)
			errs <- err
		}()
	}
	ok := 0
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case bustest.IsCode(err, bus.CodeUnavailable) || bustest.IsCode(err, bus.CodeNotFound):
		default:
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d deletes succeeded", ok)
	}
	e.deleted(key)
	e.archived(key, old.SessionID, archives.ReasonDeleted, entries)
}

// TestIncompleteArchive: a process killed inside the archive write (the
// object stored, its digest not yet recorded) removed nothing; the sweep
// starts the operation again and drops the incomplete object.
func TestIncompleteArchive(t *testing.T) {
	e := newEnv(t)
	key := "agent:main:half"
	old, entries := e.session(key, 30, 1)
	obs, err := e.js.ObjectStore(e.ctx, "archives")
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"key": key, "sessionId": old.SessionID, "agentId": "main", "reason": archives.ReasonDeleted,
		"state": archives.StatePending, "content-encoding": archives.ContentEncoding, "at": "1"}
	if _, err := obs.Put(e.ctx, jetstream.ObjectMeta{Name: old.SessionID + ".half", Metadata: md}, bytes.NewReader([]byte("partial"))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Archives.Read(e.ctx, old.SessionID+".half", io.Discard); !errors.Is(err, archives.ErrCorrupt) {
		t.Fatalf("reading an incomplete archive: %v", err)
	}
	if n, err := e.fresh().Finish(e.ctx); n != 1 || err != nil {
		t.Fatalf("sweep: %d %v", n, err)
	}
	e.deleted(key)
	e.archived(key, old.SessionID, archives.ReasonDeleted, entries)
}
