package lifecycle

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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

// Environment of the helper process TestSIGKILLAtEachStep starts.
const (
	killURL    = "SB_LIFECYCLE_KILL_URL"
	killCreds  = "SB_LIFECYCLE_KILL_CREDS"
	killOp     = "SB_LIFECYCLE_KILL_OP" // delete | reset | archived
	killStep   = "SB_LIFECYCLE_KILL_STEP"
	killKey    = "agent:main:killed"
	killLease  = time.Second
	killAtLine = "AT STEP "
)

// TestKillHelper is the process TestSIGKILLAtEachStep kills: it runs one
// operation and, before the step named, says so and waits to be killed.
func TestKillHelper(t *testing.T) {
	url := os.Getenv(killURL)
	if url == "" {
		t.Skip("helper process of TestSIGKILLAtEachStep")
	}
	nc, err := nats.Connect(url, nats.UserCredentials(os.Getenv(killCreds)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	o, err := openOps(ctx, nc, js)
	if err != nil {
		t.Fatal(err)
	}
	o.BeforeStep = func(_, step string) error {
		if step == os.Getenv(killStep) {
			fmt.Println(killAtLine + step)
			select {} // SIGKILL comes
		}
		return nil
	}
	switch os.Getenv(killOp) {
	case "reset":
		_, err = o.Reset(ctx, killKey, nil)
	case "archived":
		_, err = o.Delete(ctx, killKey, archives.ReasonArchived, nil)
	default:
		_, err = o.Delete(ctx, killKey, archives.ReasonDeleted, nil)
	}
	t.Fatalf("the operation ran to its end: %v", err)
}

func openOps(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) (*Ops, error) {
	names := bus.NewNames("")
	o := &Ops{JS: js, LockLease: killLease}
	var err error
	if o.Sessions, err = sessions.Open(ctx, js, names); err != nil {
		return nil, err
	}
	if o.Transcripts, err = transcripts.Open(ctx, nc, js, names); err != nil {
		return nil, err
	}
	if o.Archives, err = archives.Open(ctx, js, names); err != nil {
		return nil, err
	}
	if o.Signals, err = signals.Open(ctx, js, names); err != nil {
		return nil, err
	}
	if o.Watchers, err = watchers.Open(ctx, js, names); err != nil {
		return nil, err
	}
	o.Claims, err = claims.Open(ctx, js, names)
	return o, err
}

// TestSIGKILLAtEachStep kills a real process (SIGKILL) before each step
// of delete, reset and archive-after; then a sweep in this process, once
// the dead one's lease has run out, finishes the operation: one
// byte-identical archive, and the session deleted or reset, never half.
func TestSIGKILLAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process per step")
	}
	for _, op := range []string{"delete", "reset", "archived"} {
		for _, step := range []string{StepArchive, StepCursors, StepSignals, StepTranscript, StepEntry, StepDone} {
			t.Run(op+"/"+step, func(t *testing.T) {
				e := newEnv(t)
				e.ops.LockLease = killLease
				old, entries := e.session(killKey, 1100, 1)
				cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
				cmd.Env = append(os.Environ(), killURL+"="+e.url, killCreds+"="+e.creds, killOp+"="+op, killStep+"="+step)
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				line := make(chan string, 1)
				go func() {
					sc := bufio.NewScanner(out)
					for sc.Scan() {
						if strings.HasPrefix(sc.Text(), killAtLine) {
							line <- sc.Text()
							return
						}
					}
					close(line)
				}()
				select {
				case l, ok := <-line:
					if !ok || l != killAtLine+step {
						_ = cmd.Process.Kill()
						_ = cmd.Wait()
						t.Fatalf("helper ended without reaching step %s", step)
					}
				case <-time.After(time.Minute):
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Fatalf("helper did not reach step %s", step)
				}
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
				_ = cmd.Wait()

				sweep := e.fresh()
				var n int
				bustest.WaitFor(t, 30*time.Second, "the dead process's lease to end and the sweep to run", func() bool {
					var err error
					n, err = sweep.Finish(e.ctx)
					if err != nil {
						t.Fatal(err)
					}
					if step == StepArchive {
						return true
					}
					return n == 1
				})
				reason := map[string]string{"delete": archives.ReasonDeleted, "reset": archives.ReasonReset, "archived": archives.ReasonArchived}[op]
				if step == StepArchive {
					// killed before the archive: nothing was written or removed
					if all, _ := e.ops.Archives.List(e.ctx); len(all) != 0 || e.count(killKey) != 1100 {
						t.Fatalf("%d archives, %d entries", len(all), e.count(killKey))
					}
					return
				}
				e.archived(killKey, old.SessionID, reason, entries)
				if op == "reset" {
					e.wasReset(killKey, old)
				} else {
					e.deleted(killKey)
				}
			})
		}
	}
}
