package revocations

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// A revocation written by one store (a gateway) reaches another's watched
// set (a worker), as do the ones written before it started; a run id that
// cannot be a key is refused without a write; Stop ends the watch.
func TestRevokeAndWatch(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	gw, err := Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Microsecond)
	if err := gw.Revoke(ctx, "run-early", ReasonEnded); err != nil {
		t.Fatal(err)
	}
	w, err := Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if at, ok := w.RevokedAt("run-early"); !ok || at.Before(before) {
		t.Fatalf("revocation written before the watch: %v %v", at, ok)
	}
	if err := gw.Revoke(ctx, "abc-123.announce", ReasonKilled); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the later revocation", func() bool {
		_, ok := w.RevokedAt("abc-123.announce")
		return ok
	})
	if _, ok := w.RevokedAt("run-other"); ok {
		t.Fatal("a run never revoked is revoked")
	}
	if err := gw.Revoke(ctx, "bad key>", ReasonEnded); err == nil || !strings.Contains(err.Error(), "cannot be a revocation key") {
		t.Fatalf("bad run id: %v", err)
	}
	st, err := js.KeyValue(ctx, Bucket(names))
	if err != nil {
		t.Fatal(err)
	}
	status, err := st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status.Values() != 2 || status.TTL() != MaxAge {
		t.Fatalf("bucket: %v values, ttl %v", status.Values(), status.TTL())
	}
	gw.Stop() // never watched: returns at once
}
