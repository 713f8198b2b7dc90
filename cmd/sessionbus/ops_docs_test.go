package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/signals"
)

func TestMain(m *testing.M) {
	// the defaults of every command read the home: this machine's user's
	// state dir is none of the tests' business
	dir, err := os.MkdirTemp("", "sessionbus-home")
	if err != nil {
		panic(err)
	}
	os.Setenv("SESSIONBUS_HOME", dir)
	code := bustest.CheckLeaks(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// opsSection is the commands of docs/ops.md's own section: every line of
// its ```sh blocks.
func opsSection(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/ops.md")
	if err != nil {
		t.Fatal(err)
	}
	// the page's stock-CLI reads run as ops, which the test gives them
	if !strings.Contains(string(b), "\n"+OpsContextSave+"\nexport NATS_CONTEXT=sessionbus-ops\n") {
		t.Fatal("docs/ops.md does not say which credentials and JetStream API its nats commands read with")
	}
	_, sec, ok := strings.Cut(string(b), "\n## Inspect, replay and metrics\n")
	if !ok {
		t.Fatal("docs/ops.md has no section ## Inspect, replay and metrics")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var cmds []string
	in := false
	for line := range strings.SplitSeq(sec, "\n") {
		switch {
		case line == "```sh":
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.TrimSpace(line) != "":
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	return cmds
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// opsEnv is a server with a worker and a gateway, and one session with a
// transcript, a run and a signal event; plus a stuck run, a child past
// its deadline with a pending announce and a pending notice, written
// straight into their buckets.
type opsEnv struct {
	url, creds string
	opsCreds   string // what the stock nats CLI runs with: the ops role
	queue      *runqueue.Queue
	runs       *runs.Records
	// for docs/inbound.md's commands: the admin role's NATS credentials,
	// the token key, and a JetStream client
	adminNATS string
	op        *bus.Operator
	js        jetstream.JetStream
}

func startOpsEnv(t *testing.T) *opsEnv {
	t.Helper()
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	dir := t.TempDir()
	op, err := bus.LoadOrCreateOperator(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bustest.Context(t)
	cfg := config.Default()
	// no sweep after the one at start: the child past its deadline and
	// its pending announce, written below, stay as written
	cfg.Bus.SubagentSweepInterval = time.Hour
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	gw, err := gateway.Start(ctx, nc, cfg, op, "gw-ops", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	e := &opsEnv{url: s.URL(), creds: bustest.AdminCreds(t, s.Deployment(), op), opsCreds: bustest.RoleCreds(t, s.Deployment(), auth.RoleOps), queue: gw.Queue(), runs: gw.Runs(),
		adminNATS: bustest.RoleCreds(t, s.Deployment(), auth.RoleAdmin), op: op, js: js}
	e.run(t, "r1", "hello ops")
	// sessions whose keys hold "/", "+" and "=" (Google Chat, Signal)
	e.runIn(t, "agent:main:signal:group:q1W2+/e3=", "r-signal", "hello signal")
	e.runIn(t, "agent:main:googlechat:group:spaces/AAAA", "r-gchat", "hello space")
	sl, err := signals.Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sl.Append(ctx, signals.Event{SessionKey: "agent:main:main", Kind: signals.KindHumanDirectMessage, ActorType: signals.ActorHuman,
		DedupeKey: "ops-m1", Summary: "human message via telegram"}); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(-time.Hour).UnixMilli()
	put := func(bucket, key string, v any) {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put("runs", "r-stuck", runs.Record{RunID: "r-stuck", SessionKey: "agent:main:stuck", AgentID: "main", Status: runs.Running, Gateway: "gw-dead", Attempts: 1, CreatedAt: hour, StartedAt: hour})
	put("subagents", bus.EncodeKey("agent:main:subagent:late"), map[string]any{
		"runId": "r-late", "childSessionKey": "agent:main:subagent:late", "requesterSessionKey": "agent:main:other",
		"deadlineAt": hour, "announce": map[string]any{"state": "pending", "attempts": 2}})
	// a sub-agent watcher: gateways do not wake it (session.notices.wakeSubagents)
	put("watchers", bus.EncodeKey("agent:main:subagent:late")+".=w."+bus.EncodeKey("agent:main:subagent:w"), map[string]any{
		"watcherSessionKey": "agent:main:subagent:w", "targetSessionKey": "agent:main:subagent:late",
		"lastSeenSequence": 1, "notifiedSequence": 2, "materialSequence": 2, "updatedAt": hour})
	return e
}

// run queues a run of agent:main:main (echo) and waits for its outcome.
func (e *opsEnv) run(t *testing.T, id, msg string) {
	t.Helper()
	e.runIn(t, "agent:main:main", id, msg)
}

// runIn queues a run of session key (echo) and waits for its outcome.
func (e *opsEnv) runIn(t *testing.T, key, id, msg string) {
	t.Helper()
	ctx := bustest.Context(t)
	req := &runqueue.Request{RunID: id, SessionKey: key, AgentID: "main", Message: msg, Prompt: msg, ChainID: id, CreatedAt: time.Now().UnixMilli()}
	if err := submit.Run(ctx, e.queue, e.runs, req, &runs.Record{RunID: id, SessionKey: req.SessionKey, AgentID: "main", Status: runs.Pending, CreatedAt: req.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.runs.Wait(ctx, id); err != nil || rec.Status != runs.OK {
		t.Fatalf("run %s: %+v %v", id, rec, err)
	}
}

// sessionbus runs a sessionbus command in-process against the env.
func (e *opsEnv) sessionbus(fields []string, stdout, stderr io.Writer) int {
	args := append([]string{fields[1], "--server", e.url, "--creds", e.creds}, fields[2:]...)
	return run(args, strings.NewReader(""), stdout, stderr)
}

// TestOpsDocsCommands runs every command of docs/ops.md's section
// "Inspect, replay and metrics" against a real server and checks what
// each shows.
func TestOpsDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	e := startOpsEnv(t)
	cmds := opsSection(t)
	// what each documented command's output must contain
	want := map[string][]string{
		"sessionbus inspect": {"SB_RUNS", "SB_TRANSCRIPTS", "gateways", "STUCK RUNS (1)", "r-stuck", "gw-dead",
			"EXPIRED CHILDREN (1)", "agent:main:subagent:late", "PENDING ANNOUNCES (1)", "PENDING NOTICES (1)"},
		"sessionbus inspect --json":                {`"stuckRuns": [`, `"runId": "r-stuck"`, `"name": "runs"`, `"state": "pending"`, `"notifiedSequence": 2`},
		"sessionbus inspect --stuck 5m":            {"STUCK RUNS (1)"},
		"sessionbus replay agent:main:main":        {"transcript #0  user  hello ops", "transcript #1  assistant  hello ops", "run r1  created", "run r1  started  gateway gw-ops", "run r1  ok  hello ops", "human_direct_message  (human) human message via telegram"},
		"sessionbus replay --json agent:main:main": {`"source":"transcript"`, `"source":"run"`, `"source":"signal"`, `"runId":"r1"`},
		"nats stream report":                       {"SB_RUNS", "KV_runs"},
		"nats kv ls":                               {"runs", "subagents"},
		"nats consumer report SB_RUNS":             {"gateways"},
		"nats consumer info SB_RUNS gateways":      {"gateways"},
		"nats kv ls runs":                          {"r1", "r-stuck"},
		"nats kv get runs r1 --raw":                {`"runId":"r1"`, `"status":"ok"`},
		"nats kv ls subagents":                     {bus.EncodeKey("agent:main:subagent:late")},
		"nats kv ls watchers":                      {".=w."},
		"nats sub sb.tr.agent.main.main --stream SB_TRANSCRIPTS --all -T --raw":                       {`"role":"user"`, `"hello ops"`},
		"nats sub sb.sig.agent.main.main --stream SB_SIGNALS --all -T --raw":                          {`"kind":"human_direct_message"`},
		"nats stream get SB_TRANSCRIPTS --last-for sb.tr.agent.main.main":                             {`"role":"assistant"`},
		"nats sub sb.tr.agent.main.signal.group.q1W2=2B/e3=3D --stream SB_TRANSCRIPTS --all -T --raw": {`"hello signal"`},
		"nats stream get SB_TRANSCRIPTS --last-for sb.tr.agent.main.googlechat.group.spaces/AAAA":     {`"role":"assistant"`, "hello space"},
		"curl -s http://127.0.0.1:9464/metrics":                                                       {"sessionbus_run_queue_up 1", "sessionbus_tool_requests_total"},
		"curl -s http://127.0.0.1:9464/healthz":                                                       {"ok"},
		"curl -s http://127.0.0.1:9464/readyz":                                                        {"ready"},
		"nats micro stats sessionbus":                                                                 {"sessions_list"},
	}
	special := map[string]bool{"sessionbus replay --follow agent:main:main": true, "sessionbus worker --metrics 127.0.0.1:9464": true}
	for _, c := range cmds {
		if want[c] == nil && !special[c] {
			t.Errorf("documented command %q is not checked by this test", c)
		}
	}
	if t.Failed() {
		return
	}
	var metricsAddr string
	var stopWorker func()
	defer func() {
		if stopWorker != nil {
			stopWorker()
		}
	}()
	for _, c := range cmds {
		fields := strings.Fields(c)
		var out string
		switch {
		case c == "sessionbus worker --metrics 127.0.0.1:9464":
			metricsAddr, stopWorker = e.startWorker(t)
			continue
		case c == "sessionbus replay --follow agent:main:main":
			e.follow(t, fields)
			continue
		case fields[0] == "sessionbus":
			var stdout, stderr bytes.Buffer
			if code := e.sessionbus(fields, &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", c, code, stdout.String(), stderr.String())
			}
			out = stdout.String()
		case fields[0] == "nats":
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "nats", "-s", e.url}, fields[1:]...)...)
			cmd.Env = opsContext(t, e.url, e.opsCreds) // as the page says to set up
			b, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("%s: %v\n%s", c, err, b)
			}
			out = string(b)
		case fields[0] == "curl":
			if metricsAddr == "" {
				t.Fatalf("%s comes before the documented command that serves the metrics", c)
			}
			url := strings.Replace(fields[len(fields)-1], "127.0.0.1:9464", metricsAddr, 1)
			res, err := http.Get(url)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s\n%s", c, res.Status, b)
			}
			out = string(b)
		default:
			t.Fatalf("documented command %q: the test does not know how to run it", c)
		}
		for _, w := range want[c] {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", c, w, out)
			}
		}
	}
}

// startWorker runs `sessionbus worker --metrics` in-process on a free
// port; stop ends it as SIGINT would, and checks it exited 0.
func (e *opsEnv) startWorker(t *testing.T) (addr string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	_ = l.Close()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- e.sessionbus([]string{"sessionbus", "worker", "--metrics", addr}, &stdout, &stderr) }()
	bustest.WaitFor(t, time.Minute, "worker ready", func() bool {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d:\n%s", code, stderr.String())
		default:
		}
		return strings.HasPrefix(stdout.String(), "ready")
	})
	// requests until this worker answered one (the queue group shares
	// them with the env's worker), for the tool metrics to show
	op, err := bus.LoadOperator(e.creds)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	nc, _ := jetstreamConn(t, e.url, e.creds)
	bustest.WaitFor(t, time.Minute, "the metrics worker to answer a request", func() bool {
		if _, err := bus.Call(bustest.Context(t), nc, bus.NewNames(""), tok, "sessions_list", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		res, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return strings.Contains(string(b), `sessionbus_tool_requests_total{tool="sessions_list"}`)
	})
	return addr, func() {
		// the worker waits for SIGINT (caught: signal.Notify)
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("worker exited %d:\n%s", code, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Error("worker did not stop on SIGINT")
		}
	}
}

func jetstreamConn(t *testing.T, url, creds string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := connect(url, "ops docs test", credsOptions(creds)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// follow runs replay --follow: it prints the history, then a run queued
// after it started, and ends when its context does.
func (e *opsEnv) follow(t *testing.T, fields []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	old := stopContext
	stopContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	defer func() { stopContext = old }()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- e.sessionbus(fields, &stdout, &stderr) }()
	defer func() {
		if t.Failed() {
			t.Logf("replay --follow printed:\n%s%s", stdout.String(), stderr.String())
		}
	}()
	bustest.WaitFor(t, time.Minute, "replay --follow to print the history", func() bool {
		return strings.Contains(stderr.String(), "following")
	})
	if !strings.Contains(stdout.String(), "transcript #1  assistant  hello ops") {
		t.Fatalf("replay --follow history:\n%s", stdout.String())
	}
	e.run(t, "r2", "second turn")
	bustest.WaitFor(t, time.Minute, "replay --follow to show the new run", func() bool {
		out := stdout.String()
		return strings.Contains(out, "  user  second turn") && strings.Contains(out, "  assistant  second turn") &&
			strings.Contains(out, "run r2  ok  second turn")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("replay --follow exited %d:\n%s", code, stderr.String())
	}
}

// OpsContextSave is the line the docs give to save the ops role's nats
// context: its credentials and the JetStream API prefix the workers check.
const OpsContextSave = `nats context save sessionbus-ops --creds "$(sessionbus home --role ops)" --js-api-prefix sb.ops.js`

// opsContext runs the docs' OpsContextSave, with creds, in a config dir of
// its own and returns the environment that selects the context.
func opsContext(t *testing.T, url, creds string) []string {
	t.Helper()
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	args := strings.Fields(strings.Replace(OpsContextSave, `"$(sessionbus home --role ops)"`, creds, 1))
	cmd := exec.Command("go", append([]string{"tool", "nats", "-s", url}, args[1:]...)...)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", OpsContextSave, err, b)
	}
	return append(env, "NATS_CONTEXT=sessionbus-ops")
}
