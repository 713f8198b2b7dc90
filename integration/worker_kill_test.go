package integration

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// TestWorkerSIGKILL kills one of two worker processes while requests flow:
// the other keeps answering, and a request caught on the dead worker
// succeeds when retried.
func TestWorkerSIGKILL(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "operator.creds")
	if err := op.WriteCreds(creds); err != nil {
		t.Fatal(err)
	}
	w1 := start(t, "worker", "--server", s.URL(), "--creds", creds)
	w1.waitLine(t, "ready ")
	w2 := start(t, "worker", "--server", s.URL(), "--creds", creds)
	w2.waitLine(t, "ready ")

	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	names := bus.NewNames("")
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := bus.Call(ctx, nc, names, tok, "sessions_list", []byte(`{}`))
		return err
	}
	// every request must eventually be answered; only a timeout or a
	// no-responders race on the killed worker may need a retry
	var answered, retried atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for attempt := 0; ; attempt++ {
					err := call()
					if err == nil {
						answered.Add(1)
						break
					}
					if attempt > 5 || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || isUnavailable(err)) {
						t.Errorf("request failed for good: %v", err)
						return
					}
					retried.Add(1)
				}
			}
		}()
	}
	bustest.WaitFor(t, 60*time.Second, "200 answers", func() bool { return answered.Load() > 200 })
	if err := w1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-w1.done
	w1.done <- nil
	before := answered.Load()
	bustest.WaitFor(t, 60*time.Second, "500 more answers after the kill", func() bool { return answered.Load() > before+500 })
	close(stop)
	wg.Wait()
	// after the kill, a fresh request goes to the survivor at once
	for i := 0; i < 50; i++ {
		if err := call(); err != nil {
			t.Fatalf("request %d after the kill: %v", i, err)
		}
	}
	t.Logf("answered %d, retried %d", answered.Load(), retried.Load())
}

func isUnavailable(err error) bool {
	e, ok := bus.AsError(err)
	return ok && e.Code == bus.CodeUnavailable
}
