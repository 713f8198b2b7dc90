package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// faultFullEnv runs the cluster fault tests at the full counts
// under -race too (they always do without it).
const faultFullEnv = "SESSIONBUS_FAULT_FULL"

// faultCount is full, or small under the race detector (which slows a
// 3-node cluster about tenfold) unless SESSIONBUS_FAULT_FULL=1.
func faultCount(full, race int) int {
	if raceBuild && os.Getenv(faultFullEnv) != "1" {
		return race
	}
	return full
}

// clusterFaultConfig: every stream and bucket R3; one script agent that
// answers at once, so the tests measure the bus, not the agent; children
// enough for every spawn of the test, and quotas that let thousands of
// sends from one session through.
const clusterFaultConfig = loadQuotas + `
bus:
  replicas: 3
  subagentSweepInterval: 500ms
agents:
  defaults:
    subagents:
      maxChildrenPerAgent: 5000
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: ".*"
            reply: "ok {{message}}"
`

// clusterCaller sends and spawns; the send targets are its children, so
// sessions_send skips the agent-to-agent flow.
const clusterCaller = "agent:main:main"

// faultCall calls tool until it answers, retrying with the same params (so
// the same idempotencyKey) a transport failure, a 5xx, or a result with
// status "error" whose error is a transient one: while leaders move a
// request can time out or fail after its first write, and the tools
// report a store that did not answer in time as such a result.
func faultCall(t *testing.T, nc *nats.Conn, names bus.Names, tok, tool string, params []byte, out any) (retries int, err error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := bus.Call(ctx, nc, names, tok, tool, params)
		cancel()
		if err == nil {
			var probe struct{ Status, Error string }
			if json.Unmarshal(b, &probe) == nil && probe.Status == "error" && transientText.MatchString(probe.Error) && attempt < 20 {
				t.Logf("%s answered a transient error, retrying with the same params: %s", tool, probe.Error)
				continue
			}
			return attempt, json.Unmarshal(b, out)
		}
		be, isBus := bus.AsError(err)
		transient := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, nats.ErrNoResponders) || (isBus && be.Code >= 500)
		if !transient || attempt >= 20 {
			return attempt, fmt.Errorf("%s failed for good after %d attempts: %w", tool, attempt+1, err)
		}
	}
}

// transientText matches the errors a leader change or a reconnect gives.
var transientText = regexp.MustCompile(`context deadline exceeded|server is disconnected|no responders|temporarily unavailable|connection reconnecting|no response from stream`)

// sendResult is the part of a sessions_send reply the fault tests check.
type sendResult struct {
	RunID, Status, Reply, Error string
}

// spawnResult is the part of a sessions_spawn reply they check.
type spawnResult struct {
	Status, ChildSessionKey, RunID, Error string
}

// createChildren creates n sessions spawned by parent (sessions_send to
// them skips the agent-to-agent flow) and waits until worker w sees them.
func createChildren(t *testing.T, w *handlers.Worker, parent, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent:main:subagent:%s%03d", prefix, i)
	}
	createSessions(t, w, parent, keys...)
	return keys
}

// createSessions creates the entries of keys (spawned by parent, if any)
// and waits until worker w sees them.
func createSessions(t *testing.T, w *handlers.Worker, parent string, keys ...string) {
	t.Helper()
	var last uint64
	for _, key := range keys {
		now := time.Now().UnixMilli()
		retryFor(t, 60*time.Second, "create "+key, func(ctx context.Context) error {
			rev, err := w.Deps.Store.Create(ctx, &sessions.Entry{
				Key: key, AgentID: rules.AgentIDFromKey(key), SessionID: sessions.NewID(),
				CreatedAt: now, UpdatedAt: now, SpawnedBy: parent,
			})
			if errors.Is(err, sessions.ErrExists) {
				return nil // an earlier attempt wrote it
			}
			last = max(last, rev)
			return err
		})
	}
	retryFor(t, 60*time.Second, "index sync", func(ctx context.Context) error { return w.Deps.Index.WaitApplied(ctx, last) })
}

// checkRunParts checks that session's transcript holds every (run, part)
// at most once, and the prompt and reply of each run in want exactly once.
// Reads are retried while a cluster's leaders move.
func checkRunParts(t *testing.T, tr *transcripts.Store, session string, want []string) {
	t.Helper()
	var counts map[string]int
	retryFor(t, 60*time.Second, "read "+session, func(ctx context.Context) error {
		var err error
		counts, err = runParts(ctx, tr, session)
		return err
	})
	for p, c := range counts {
		if c != 1 {
			t.Errorf("%s: %s appended %d times", session, p, c)
		}
	}
	for _, run := range want {
		for _, part := range []string{"prompt", "reply"} {
			if counts[run+"/"+part] != 1 {
				t.Errorf("%s: run %s has %d %s entries, want 1", session, run, counts[run+"/"+part], part)
			}
		}
	}
}

// runParts counts the transcript entries of session per "run/part" marker.
func runParts(ctx context.Context, tr *transcripts.Store, session string) (map[string]int, error) {
	enc := bus.EncodeKey(session)
	n, err := tr.Count(ctx, enc)
	if err != nil {
		return nil, err
	}
	entries, err := tr.Read(ctx, enc, 0, n)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, e := range entries {
		var m struct {
			Marker *struct{ Run, Part string } `json:"__sessionbus"`
		}
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", session, e.N, err)
		}
		if m.Marker != nil {
			counts[m.Marker.Run+"/"+m.Marker.Part]++
		}
	}
	return counts, nil
}

// TestClusterLeaderKill: on a 3-node R3 cluster, while sessions_send calls
// (each waiting for its reply) and sessions_spawn calls flow through two
// workers and two gateways, the node leading SB_RUNS is stopped (and
// restarted), then the node leading the sessions bucket. Every send
// completes exactly once with its reply, every spawn is accepted once and
// its completion is announced to its requester exactly once.
//
// 2,000 sends and 200 spawns; under -race 200 and 20 unless
// SESSIONBUS_FAULT_FULL=1.
func TestClusterLeaderKill(t *testing.T) {
	start0 := time.Now()
	nSends, nSpawns := faultCount(2000, 200), faultCount(200, 20)
	const senders = 16
	d := newClusterDeployment(t, clusterFaultConfig)
	w1 := d.startWorker(t, d.connect(t, "worker 1", 0))
	d.startWorker(t, d.connect(t, "worker 2", 2))
	d.startGateway(t, d.connect(t, "gw-a", 1), "gw-a", 5*time.Second)
	d.startGateway(t, d.connect(t, "gw-b", 2), "gw-b", 5*time.Second)
	deps := w1.Deps
	targets := createChildren(t, w1, clusterCaller, "lk", 8)
	// announces run as turns of their requester, one at a time per
	// session: four requesters share the spawns
	requesters := []string{clusterCaller, "agent:main:rq1", "agent:main:rq2", "agent:main:rq3"}
	toks := map[string]string{}
	for _, r := range requesters {
		tok, err := d.op.Mint(bus.Caller{SessionKey: r}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		toks[r] = tok
	}
	clients := []*nats.Conn{d.connect(t, "client 1", 1), d.connect(t, "client 2", 0)}

	sends := make([]sendResult, nSends)
	spawns := make([]spawnResult, nSpawns)
	var completed, retries atomic.Int64
	do := func(job int) {
		nc := clients[job%len(clients)]
		// every tenth job is a spawn while they last
		if job%10 == 0 && job/10 < nSpawns {
			i := job / 10
			req := requesters[i%len(requesters)]
			params, _ := json.Marshal(map[string]any{"task": fmt.Sprintf("job %03d", i), "idempotencyKey": fmt.Sprintf("lk-spawn-%03d", i)})
			n, err := faultCall(t, nc, d.names, toks[req], "sessions_spawn", params, &spawns[i])
			retries.Add(int64(n))
			if err != nil {
				t.Errorf("spawn %d: %v", i, err)
			}
		} else {
			i := job - min(job/10+1, nSpawns)
			params, _ := json.Marshal(map[string]any{
				"sessionKey": targets[i%len(targets)], "message": fmt.Sprintf("m-lk-%04d", i),
				"timeoutSeconds": 60, "idempotencyKey": fmt.Sprintf("lk-%04d", i),
			})
			n, err := faultCall(t, nc, d.names, toks[clusterCaller], "sessions_send", params, &sends[i])
			retries.Add(int64(n))
			if err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
		completed.Add(1)
	}
	total := nSends + nSpawns
	work := make(chan int)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for j := range work {
				do(j)
			}
		})
	}
	go func() {
		for j := range total {
			work <- j
		}
		close(work)
	}()

	bustest.WaitFor(t, 120*time.Second, "a quarter of the calls", func() bool { return completed.Load() >= int64(total/4) })
	runsStream := d.names.RunsStream()
	d.killStreamLeader(t, runsStream)
	bustest.WaitFor(t, 120*time.Second, "half of the calls", func() bool { return completed.Load() >= int64(total/2) })
	sessionsStream := bus.KVStream(d.names.Bucket("sessions"))
	d.killStreamLeader(t, sessionsStream)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d sends and %d spawns answered in %v, %d retried calls", nSends, nSpawns, time.Since(start0).Round(time.Millisecond), retries.Load())

	// Sends: each its own run, ok with its own reply, once in the
	// transcript.
	ctx := bustest.Context(t)
	results := map[int]sendResult{}
	for i, r := range sends {
		results[i] = r
	}
	checkSends(t, deps, "lk", targets, results)

	// Spawns: every child ends ok and is announced to its requester once.
	children := map[string]string{} // child key -> requester
	for i, r := range spawns {
		if r.Status != "accepted" || r.ChildSessionKey == "" {
			t.Errorf("spawn %d: %+v", i, r)
			continue
		}
		if _, dup := children[r.ChildSessionKey]; dup {
			t.Errorf("spawn %d: child %s spawned twice", i, r.ChildSessionKey)
		}
		children[r.ChildSessionKey] = requesters[i%len(requesters)]
	}
	if t.Failed() {
		t.FailNow()
	}
	var stuck *subagents.Record // the last child seen undelivered, for the failure's log
	defer func() {
		if t.Failed() && stuck != nil {
			b, _ := json.Marshal(stuck)
			t.Logf("a child whose announce was not delivered: %s", b)
			if stuck.Announce != nil && stuck.Announce.DeliveryRun != "" {
				rec, _, err := deps.Runs.Get(context.Background(), stuck.Announce.DeliveryRun)
				rb, _ := json.Marshal(rec)
				t.Logf("the run that carries it: %s (err %v)", rb, err)
			}
			if n, err := deps.Queue.Unfinished(context.Background()); err == nil {
				t.Logf("runs unfinished in the queue: %d", n)
			}
		}
	}()
	bustest.WaitFor(t, 120*time.Second, "every announce delivered", func() bool {
		for k := range children {
			if r := deps.Children.Get(k); r == nil || r.Announce == nil || r.Announce.State != subagents.AnnounceDelivered {
				stuck = r
				return false
			}
		}
		return true
	})
	bustest.WaitFor(t, 60*time.Second, "every run finished", func() bool {
		n, err := deps.Queue.Unfinished(ctx)
		return err == nil && n == 0
	})
	announced := 0
	for _, req := range requesters {
		perChild, _ := announcesIn(t, deps.Transcripts, req)
		for k, n := range perChild {
			if children[k] != req {
				t.Errorf("%s got an announce of %s, not its child", req, k)
			}
			if n != 1 {
				t.Errorf("child %s announced %d times to %s", k, n, req)
			}
			announced += n
		}
	}
	if announced != nSpawns {
		t.Errorf("%d announces for %d spawns", announced, nSpawns)
	}
	for k := range children {
		if r := deps.Children.Get(k); r.Outcome != subagents.OutcomeOK {
			t.Errorf("child %s outcome %q", k, r.Outcome)
		}
	}
	t.Logf("checked in %v in all", time.Since(start0).Round(time.Millisecond))
}
