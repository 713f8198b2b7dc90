package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// An operator deletes SB_SIGNALS under a running worker and gateway. It
// comes back, starting past every sequence a session's head names: the
// session's state version does not go back, changesSince 0 reports the
// lost events as a history gap (it answered events: [] and no gap, and the
// stream never came back), a read while it is gone is a 503, and the next
// event is newer than any version callers saw. The watchers bucket and the
// archives object store come back too.
func TestSignalLogDeletedUnderARunningServer(t *testing.T) {
	s := startNotices(t, nil)
	s.gateway("gw1")
	child, _ := s.spawn(noticeParent)
	bustest.WaitFor(t, 20*time.Second, "the announce turn in the parent", func() bool { return len(s.transcript(noticeParent)) >= 2 })
	status := func() (map[string]any, error) {
		return s.Call(noticeParent, "session_status", `{"sessionKey":"`+child+`","changesSince":0}`)
	}
	res, err := status()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := res["stateVersion"].(float64)
	if sc, _ := res["stateChanges"].(map[string]any); before == 0 || sc["historyGap"] != false {
		t.Fatalf("the child's status before the deletion: %v", res)
	}

	names := bus.NewNames("")
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), names.SignalsStream()); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 30*time.Second, "changesSince to report the deleted events as a gap", func() bool {
		res, err := status()
		if err != nil {
			if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeUnavailable {
				t.Fatalf("session_status while SB_SIGNALS was gone: %v, want a 503", err)
			}
			return false
		}
		if res["stateVersion"] != before {
			t.Fatalf("state version went from %v to %v", before, res["stateVersion"])
		}
		sc, _ := res["stateChanges"].(map[string]any)
		return sc["historyGap"] == true
	})
	st, err := js.Stream(context.Background(), names.SignalsStream())
	if err != nil {
		t.Fatal(err)
	}
	if first := st.CachedInfo().Config.FirstSeq; float64(first) <= before {
		t.Fatalf("the new SB_SIGNALS starts at %d, at or below the version %v callers saw", first, before)
	}
	s.human(child, "are you there?")
	bustest.WaitFor(t, 30*time.Second, "an event newer than the deleted ones", func() bool {
		seqs, res := s.humanEvents(noticeParent, child, uint64(before))
		return len(seqs) == 1 && float64(seqs[0]) > before && res["stateVersion"] == float64(seqs[0])
	})

	if err := js.DeleteKeyValue(context.Background(), names.WatchersBucket()); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteObjectStore(context.Background(), names.ArchivesBucket()); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 30*time.Second, "the watchers bucket and the archives store to be recreated", func() bool {
		_, kerr := js.KeyValue(context.Background(), names.WatchersBucket())
		_, oerr := js.ObjectStore(context.Background(), names.ArchivesBucket())
		return kerr == nil && oerr == nil
	})
}
