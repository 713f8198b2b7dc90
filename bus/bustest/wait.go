package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// WaitFor checks cond every 10 ms until it holds, and fails the test with
// what when it still does not after within. It is the one way tests here
// wait on a condition: a deadline, never a fixed sleep.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}

// Context is a context for one test's server calls: a minute, ended with
// the test.
func Context(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// Acked waits for the acknowledgement of an asynchronous publish (f and
// err as the publish returned them) and returns the stored sequence,
// failing the test on an error or after a minute.
func Acked(t testing.TB, f jetstream.PubAckFuture, err error) uint64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-f.Ok():
		return a.Sequence
	case err := <-f.Err():
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatal("no acknowledgement within a minute")
	}
	return 0
}

// IsCode reports whether err is a thrown *bus.Error with code.
func IsCode(err error, code int) bool {
	e, ok := bus.AsError(err)
	return ok && e.Code == code
}
