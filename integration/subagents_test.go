package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// subagentConfig: the requester (main) answers each announce after a short
// delay, so its lane is busy while announces pile up; children (kid) work
// a little, or for a minute when their task says "slow". Every child runs
// at once (maxConcurrent above the most these tests spawn): the scenarios
// need them all running when the gateways go; the bound has its own test
// (subagent_concurrency_test.go).
const subagentConfig = `
bus:
  subagentSweepInterval: 500ms
agents:
  defaults:
    subagents:
      maxConcurrent: 64
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: ".*"
            delayMs: 40
            reply: "noted"
    - id: kid
      runtime: script
      script:
        rules:
          - match: "slow"
            delayMs: 60000
            reply: "too late"
          - match: ".*"
            delayMs: 100
            reply: "kid done: {{message}}"
`

const subagentRequester = "agent:main:main"

// subagentBus is the server, the gateways' config and credentials, and the
// stores the test spawns into and reads from.
type subagentBus struct {
	url, cfgPath, creds string
	js                  jetstream.JetStream
	stores              spawns.Stores
	children            *subagents.Index
	tr                  *transcripts.Store
	queue               *runqueue.Queue
}

func newSubagentBus(t *testing.T) *subagentBus {
	dep := newDeployment(t, subagentConfig)
	s, nc, cfg, cfgPath, creds := dep.s, dep.nc, dep.cfg, dep.cfgPath, dep.creds
	js := dep.js
	ctx := bustest.Context(t)
	var err error
	names := bus.NewNames(cfg.Bus.Prefix)
	b := &subagentBus{url: s.URL(), cfgPath: cfgPath, creds: creds, js: js}
	if b.stores.Registry, err = subagents.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if b.stores.Sessions, err = sessions.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if b.queue, err = runqueue.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	b.stores.Queue = b.queue
	if b.stores.Runs, err = runs.Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stores.Runs.Close)
	if b.tr, err = transcripts.Open(ctx, nc, js, names); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.tr.Close)
	if b.children, err = subagents.StartIndex(ctx, b.stores.Registry, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.children.Stop)
	return b
}

func (b *subagentBus) gateway(t *testing.T, id string) *proc {
	p := start(t, "gateway", "--server", b.url, "--id", id, "--creds", b.creds, "--config", b.cfgPath, "--log-level", "warn", "--ack-wait", "5s")
	p.waitLine(t, "ready "+id)
	return p
}

func (b *subagentBus) spawn(t *testing.T, n int, c spawns.Child) []*subagents.Record {
	out := make([]*subagents.Record, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cc := c
			cc.Task = fmt.Sprintf("%s %03d", c.Task, i)
			rec, err := spawns.Spawn(bustest.Context(t), b.stores, cc)
			if err != nil {
				t.Errorf("spawn %d: %v", i, err)
				return
			}
			out[i] = rec
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// count returns how many of kids satisfy ok in the index.
func (b *subagentBus) count(kids []*subagents.Record, ok func(*subagents.Record) bool) int {
	n := 0
	for _, k := range kids {
		if r := b.children.Get(k.ChildSessionKey); r != nil && ok(r) {
			n++
		}
	}
	return n
}

var sessionKeyLine = regexp.MustCompile(`(?m)^session_key: (.+)$`)

// announcesIn is the package's announcesIn on b's transcripts.
func (b *subagentBus) announcesIn(t *testing.T, session string) (map[string]int, map[string]string) {
	return announcesIn(t, b.tr, session)
}

// announcesIn counts the completion announces in session's transcript per
// child session key, and checks every (run, part) appears once.
func announcesIn(t *testing.T, tr *transcripts.Store, session string) (map[string]int, map[string]string) {
	entries := transcriptEntries(t, tr, session)
	perChild, text := map[string]int{}, map[string]string{}
	parts := map[string]int{}
	for _, e := range entries {
		var m struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			Provenance *struct {
				Kind string `json:"kind"`
			} `json:"provenance"`
			Marker *struct{ Run, Part string } `json:"__sessionbus"`
		}
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatal(err)
		}
		if m.Marker != nil {
			parts[m.Marker.Run+"/"+m.Marker.Part]++
		}
		if m.Role != "user" || m.Provenance == nil || m.Provenance.Kind != "internal_system" || noticeLine.MatchString(m.Content) {
			continue // not an announce (a notice is counted by the notice tests)
		}
		k := sessionKeyLine.FindStringSubmatch(m.Content)
		if k == nil {
			t.Fatalf("announce without a session_key line: %s", m.Content)
		}
		perChild[k[1]]++
		text[k[1]] = m.Content
	}
	for p, c := range parts {
		if c != 1 {
			t.Errorf("%s: %s appended %d times", session, p, c)
		}
	}
	return perChild, text
}

func announceDone(r *subagents.Record) bool {
	return r.Announce != nil && r.Announce.State == subagents.AnnounceDelivered
}

// TestSubagentAnnouncesSurviveGatewayKill: two gateway processes, 100
// children of one requester; the gateway running the requester's turn is
// SIGKILLed after about half the children finished. Every announce reaches
// the requester exactly once.
func TestSubagentAnnouncesSurviveGatewayKill(t *testing.T) {
	b := newSubagentBus(t)
	gws := map[string]*proc{"gw-a": b.gateway(t, "gw-a"), "gw-b": b.gateway(t, "gw-b")}
	const children = 100
	kids := b.spawn(t, children, spawns.Child{Requester: subagentRequester, Agent: "kid", Task: "job"})

	bustest.WaitFor(t, 60*time.Second, "half the children finished", func() bool {
		return b.count(kids, func(r *subagents.Record) bool { return !r.Active() }) >= children/2
	})
	// kill the gateway the moment it is seen running the requester's turn
	ctx := bustest.Context(t)
	w, err := b.stores.Runs.KV().WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	victim := runstest.CatchRunning(t, ctx, w, "never saw the requester's turn running", func(_ string, rec *runs.Record) bool {
		return rec.SessionKey == subagentRequester
	}).Gateway
	_ = w.Stop()
	v := gws[victim]
	if err := v.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-v.done
	v.done <- nil
	done := b.count(kids, func(r *subagents.Record) bool { return !r.Active() })
	t.Logf("SIGKILLed %s (running the requester's turn) after %d of %d children finished", victim, done, children)

	bustest.WaitFor(t, 120*time.Second, "every announce delivered", func() bool {
		return b.count(kids, announceDone) == children
	})
	bustest.WaitFor(t, 60*time.Second, "every run finished", func() bool {
		n, err := b.queue.Unfinished(ctx)
		return err == nil && n == 0
	})
	perChild, _ := b.announcesIn(t, subagentRequester)
	total := 0
	for _, k := range kids {
		if perChild[k.ChildSessionKey] != 1 {
			t.Errorf("child %s announced %d times in the requester", k.ChildSessionKey, perChild[k.ChildSessionKey])
		}
		total += perChild[k.ChildSessionKey]
	}
	if total != children || len(perChild) != children {
		t.Fatalf("%d announces from %d children in the requester, want %d", total, len(perChild), children)
	}
	for _, k := range kids {
		if r := b.children.Get(k.ChildSessionKey); r.Outcome != subagents.OutcomeOK {
			t.Errorf("child %s outcome %q", k.ChildSessionKey, r.Outcome)
		}
	}
}

// TestSubagentTimeoutsWhileEveryGatewayIsDown: 20 children with
// runTimeoutSeconds 2 are running when every gateway stops; one gateway
// starts 5 s later. All 20 end as timeout and each announces it once.
func TestSubagentTimeoutsWhileEveryGatewayIsDown(t *testing.T) {
	b := newSubagentBus(t)
	gws := []*proc{b.gateway(t, "gw-a"), b.gateway(t, "gw-b")}
	const children = 20
	kids := b.spawn(t, children, spawns.Child{Requester: subagentRequester, Agent: "kid", Task: "slow job", TimeoutSeconds: 2})
	bustest.WaitFor(t, 30*time.Second, "every child running", func() bool {
		return b.count(kids, func(r *subagents.Record) bool { return r.StartedAt != 0 && r.DeadlineAt != 0 }) == children
	})
	for _, p := range gws {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range gws {
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(60 * time.Second):
			t.Fatalf("a gateway did not stop within 60s of SIGTERM: %s", p.errText())
		}
	}
	stopped := time.Now()
	if n := b.count(kids, func(r *subagents.Record) bool { return !r.Active() }); n == children {
		t.Fatalf("every child ended before the gateways stopped; the scenario needs them running")
	}
	time.Sleep(5 * time.Second) // the scenario: every gateway down for 5 s, past every deadline
	b.gateway(t, "gw-c")
	bustest.WaitFor(t, 60*time.Second, "every timeout announced", func() bool {
		return b.count(kids, announceDone) == children
	})
	t.Logf("all %d timeouts announced %v after the gateways stopped", children, time.Since(stopped).Round(time.Millisecond))
	ctx := bustest.Context(t)
	bustest.WaitFor(t, 60*time.Second, "every run finished", func() bool {
		n, err := b.queue.Unfinished(ctx)
		return err == nil && n == 0
	})
	perChild, text := b.announcesIn(t, subagentRequester)
	for _, k := range kids {
		r := b.children.Get(k.ChildSessionKey)
		if r.Outcome != subagents.OutcomeTimeout {
			t.Errorf("child %s outcome %q", k.ChildSessionKey, r.Outcome)
		}
		rec, _, err := b.stores.Runs.Get(ctx, k.RunID)
		if err != nil || rec.Status != runs.Timeout {
			t.Errorf("child %s run %+v, %v", k.ChildSessionKey, rec, err)
		}
		if perChild[k.ChildSessionKey] != 1 {
			t.Errorf("child %s announced %d times", k.ChildSessionKey, perChild[k.ChildSessionKey])
		} else if !regexp.MustCompile(`(?m)^status: timed out$`).MatchString(text[k.ChildSessionKey]) {
			t.Errorf("child %s announce does not say timed out: %s", k.ChildSessionKey, text[k.ChildSessionKey])
		}
	}
	if len(perChild) != children {
		t.Fatalf("%d children announced, want %d", len(perChild), children)
	}
}
