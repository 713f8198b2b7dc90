package signals

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/opsapi"
)

// natsCLI runs the stock nats CLI (a go.mod tool dependency) the way
// docs/signals.md shows it: as ops, through its JetStream API.
func natsCLI(ctx context.Context, url, creds string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "nats", "-s", url, "--creds", creds, "--js-api-prefix", bus.NewNames("").OpsJSAPI()}, args...)...)
	return cmd
}

// TestDocsCommands runs the commands docs/signals.md gives for reading one
// session's signal log and watching it live.
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	ops := bustest.RoleCreds(t, s.Deployment(), auth.RoleOps) // as docs/signals.md saves in its context
	if doc, err := os.ReadFile("../../docs/signals.md"); err != nil || !strings.Contains(string(doc), "\nnats context save sessionbus-ops --creds \"$(sessionbus home --role ops)\" --js-api-prefix sb.ops.js\nexport NATS_CONTEXT=sessionbus-ops\n") {
		t.Fatalf("docs/signals.md does not say which credentials and JetStream API its nats commands read with (%v)", err)
	}
	// what a worker serves in a deployment
	api, err := opsapi.Start(nc, bus.NewNames(""), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	ctx := bustest.Context(t)
	l, err := Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	key := "agent:main:subagent:a"
	appendOne(t, ctx, l, key, KindHumanDirectMessage, "m1")
	appendOne(t, ctx, l, "agent:main:subagent:b", KindHumanDirectMessage, "m2")
	if _, _, err := l.Append(ctx, Event{SessionKey: key, Kind: KindRunFailed, ActorType: ActorSystem, DedupeKey: "run-terminal:r1", Summary: "child run timed out", Payload: map[string]any{"outcome": "timeout"}}); err != nil {
		t.Fatal(err)
	}

	out, err := natsCLI(ctx, s.URL(), ops, "stream", "get", "SB_SIGNALS", "--last-for", "sb.sig.agent.main.subagent.a").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"summary":"child run timed out"`) || !strings.Contains(string(out), "Sb-Back: 1") {
		t.Fatalf("stream get --last-for: %v\n%s", err, out)
	}
	// stdout only: the CLI says what it subscribed to on stderr
	out, err = natsCLI(ctx, s.URL(), ops, "sub", "sb.sig.agent.main.subagent.a", "--stream", "SB_SIGNALS", "--all", "-T", "--raw").Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], `"dedupeKey":"m1"`) || !strings.Contains(lines[1], `"dedupeKey":"run-terminal:r1"`) {
		t.Fatalf("sub --all -T: %v\n%s", err, out)
	}

	out, err = natsCLI(ctx, s.URL(), ops, "kv", "get", "sigheads", "agent.main.subagent.a", "--raw").Output()
	if err != nil || !strings.Contains(string(out), `"lastSequence":3`) {
		t.Fatalf("kv get sigheads: %v\n%s", err, out)
	}

	// live: a core subscription sees each event as it is appended
	live := func(subject string, publish func(i int)) string {
		var buf bytes.Buffer
		cmd := natsCLI(ctx, s.URL(), ops, "sub", subject, "--count", "1", "--raw")
		var errBuf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &errBuf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// publish until the subscriber (starting up) has seen one
		deadline := time.After(time.Minute)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("nats sub %s: %v\n%s%s", subject, err, buf.String(), errBuf.String())
				}
				return buf.String()
			case <-deadline:
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("nats sub %s saw nothing:\n%s%s", subject, buf.String(), errBuf.String())
			case <-tick.C:
				publish(i)
			}
		}
	}
	out2 := live("sb.sig.>", func(i int) { appendOne(t, ctx, l, key, KindGoalChanged, fmt.Sprintf("goal:%d", i)) })
	if !strings.Contains(out2, `"kind":"goal_changed"`) {
		t.Fatalf("live signals: %s", out2)
	}
	notice := `Session "agent:main:subagent:a" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:a" changesSince 1.`
	out2 = live("sb.session.agent.main.main.notice", func(int) { _ = nc.Publish("sb.session.agent.main.main.notice", []byte(notice)) })
	if strings.TrimSpace(out2) != notice {
		t.Fatalf("live notices: %q", out2)
	}
}
