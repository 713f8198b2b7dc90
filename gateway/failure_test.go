package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/kv/runs"
)

// A run that can never succeed (here: its transcript stream is sealed, so
// every append is refused)
// is tried MaxRunFailures times, recorded as failed with the reason, and
// its message terminated: it does not come back every second forever.
func TestRunThatKeepsFailingIsRecordedAndDropped(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw1", Options{RetryDelay: 10 * time.Millisecond})
	st, err := e.js.Stream(context.Background(), e.names.TranscriptsStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Sealed = true
	if _, err := e.js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	req := e.request("agent:main:main", "main", "never")
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.Error || !strings.Contains(rec.Error, "gave up on this run after 5 failed attempts") {
		t.Fatalf("record %+v", rec)
	}
	waitQueueDrained(t, g)
}

// A poison message (no run request at all) is terminated at once.
func TestPoisonRunRequestTerminated(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw1", Options{})
	if _, err := e.js.Publish(context.Background(), e.names.Runs("main"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	waitQueueDrained(t, g)
	if n := redelivered(t, g); n != 0 {
		t.Fatalf("poison message redelivered %d times", n)
	}
}

// A run whose reply can never be stored (larger than a transcript entry)
// fails at once with the reason, without four retries first.
func TestRunWithAnOversizedReplyFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{RetryDelay: time.Hour})  // a retry would outlive the test
	req := e.request("agent:req:main", "req", "huge") // req echoes the message as its reply
	req.Message = "huge " + strings.Repeat("y", 1<<20)
	req.Prompt = "short prompt"
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.Error || !strings.Contains(rec.Error, "too large") {
		t.Fatalf("record %+v", rec)
	}
}
