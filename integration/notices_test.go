package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// noticesConfig: every agent answers at once.
const noticesConfig = `
bus:
  subagentSweepInterval: 500ms
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - reply: "reconciled"
    - id: kid
      runtime: script
      script:
        rules:
          - reply: "kid: {{message}}"
`

const (
	noticeParents       = 10
	noticeChildrenEach  = 5
	noticeHumanMessages = 200
	noticeSenders       = 8
	noticeKillAfter     = 60 // human messages accepted before the kill
)

var noticeLine = regexp.MustCompile(`^Session "([^"]+)" changed \(other actor\)\. Reconcile before acting: session_status sessionKey "([^"]+)" changesSince (\d+)\.$`)

// TestNoticesExactlyOnceAcrossGateways is issue 12's bar: three gateway
// processes on one server, 10 main-session parents with 5 spawned children
// each, 200 human messages through the ingress to the 50 children, one
// gateway SIGKILLed while parents' notice turns run. Each parent receives
// exactly the notices the cursor rules give, counted across all gateways:
// per (parent, child) the notices' changesSince values form one chain from
// the child_spawned seed through human_direct_message sequences of that
// child, strictly increasing (none doubled), each notice run once, and
// after quiescence every cursor has lastSeen == notified == material ==
// the child's last human message (every material event covered).
func TestNoticesExactlyOnceAcrossGateways(t *testing.T) {
	start0 := time.Now()
	dep := newDeployment(t, noticesConfig)
	s, nc, cfgPath, op, creds := dep.s, dep.nc, dep.cfgPath, dep.op, dep.creds
	d := dep.startWorker(t).Deps

	gws := map[string]*proc{}
	for _, id := range []string{"gw-a", "gw-b", "gw-c"} {
		p := start(t, "gateway", "--server", s.URL(), "--id", id, "--creds", creds, "--config", cfgPath, "--log-level", "warn", "--ack-wait", "5s")
		p.waitLine(t, "ready "+id)
		gws[id] = p
	}

	// spawn the children; each one's first run seeds its parent's cursor
	stores := spawns.Stores{Registry: d.Subagents, Sessions: d.Store, Queue: d.Queue, Runs: d.Runs}
	type pair struct{ parent, child string }
	var pairs []pair
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range noticeParents {
		parent := fmt.Sprintf("agent:main:p%02d", p)
		for range noticeChildrenEach {
			wg.Go(func() {
				rec, err := spawns.Spawn(bustest.Context(t), stores, spawns.Child{Requester: parent, Agent: "kid", Task: "watch"})
				if err != nil {
					t.Errorf("spawn: %v", err)
					return
				}
				mu.Lock()
				pairs = append(pairs, pair{parent, rec.ChildSessionKey})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	seeds := map[pair]uint64{}
	bustest.WaitFor(t, 60*time.Second, "every child's announce delivered and every parent's cursor seeded", func() bool {
		for _, pr := range pairs {
			if _, ok := seeds[pr]; ok {
				continue
			}
			r, _, err := d.Subagents.Get(context.Background(), pr.child)
			if err != nil || r.Announce == nil || r.Announce.State != subagents.AnnounceDelivered {
				return false
			}
			c, err := d.Watchers.Get(context.Background(), pr.parent, pr.child)
			if err != nil {
				return false
			}
			seeds[pr] = c.LastSeenSequence
		}
		return true
	})
	t.Logf("%d children spawned, announced and watched after %v", len(pairs), time.Since(start0).Round(time.Millisecond))

	// the kill: once enough messages are in, SIGKILL the gateway seen
	// running a parent's notice turn
	parents := map[string]bool{}
	for _, pr := range pairs {
		parents[pr.parent] = true
	}
	var accepted atomic.Int64
	killed := make(chan string, 1)
	watchCtx, stopWatch := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopWatch()
	rw, err := d.Runs.KV().WatchAll(watchCtx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		defer close(killed)
		victim := ""
		// drained to the end: the watcher's sends block otherwise
		for e := range rw.Updates() {
			rec, ok := runstest.RunUpdate(e)
			if victim != "" || !ok {
				continue
			}
			if accepted.Load() >= noticeKillAfter && rec.Status == runs.Running && parents[rec.SessionKey] && gws[rec.Gateway] != nil {
				victim = rec.Gateway
				_ = gws[victim].cmd.Process.Kill()
				killed <- victim
			}
		}
	}()

	tok, err := op.Mint(bus.Caller{Adapter: "telegram"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sendStart := time.Now()
	var next atomic.Int64
	for range noticeSenders {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= noticeHumanMessages {
					return
				}
				pr := pairs[i%len(pairs)]
				body, _ := json.Marshal(map[string]any{
					"sessionKey": pr.child, "channel": "telegram", "from": "user" + strconv.Itoa(i),
					"text": fmt.Sprintf("human %03d", i), "idempotencyKey": fmt.Sprintf("h-%03d", i),
				})
				cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
				out, err := bus.Inbound(cctx, nc, d.Names, tok, body)
				ccancel()
				if err != nil {
					t.Errorf("inbound %d: %v", i, err)
					return
				}
				var res map[string]any
				if json.Unmarshal(out, &res) != nil || res["status"] != "accepted" {
					t.Errorf("inbound %d: %s", i, out)
					return
				}
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d human messages accepted in %v", noticeHumanMessages, time.Since(sendStart).Round(time.Millisecond))
	victim, ok := <-killed
	if !ok {
		t.Fatal("never saw a parent's notice turn running after the first messages: nothing to kill")
	}
	_ = rw.Stop()
	<-watchDone
	v := gws[victim]
	<-v.done
	v.done <- nil
	t.Logf("SIGKILLed %s while it ran a parent's notice turn", victim)

	// quiescence: every cursor acknowledged its child's last event
	heads := map[pair]uint64{}
	bustest.WaitFor(t, 60*time.Second, "every notice delivered and acknowledged", func() bool {
		for _, pr := range pairs {
			if heads[pr] != 0 {
				continue
			}
			head, err := d.Notices.Log.StateVersion(context.Background(), pr.child)
			if err != nil {
				return false
			}
			c, err := d.Watchers.Get(context.Background(), pr.parent, pr.child)
			if err != nil || c.MaterialSequence != head || c.LastSeenSequence != head || c.NotifiedSequence != head {
				return false
			}
			heads[pr] = head
		}
		n, err := d.Queue.Unfinished(context.Background())
		return err == nil && n == 0
	})
	t.Logf("quiescent %v after the last message", time.Since(sendStart).Round(time.Millisecond))

	// what the log says happened to each child: its human messages
	humanSeqs := map[string][]uint64{}
	for _, pr := range pairs {
		ch, err := d.Notices.Log.Since(bustest.Context(t), pr.child, seeds[pr], signals.MaxLimit)
		if err != nil || ch.Truncated || ch.HistoryGap {
			t.Fatalf("log of %s: %+v %v", pr.child, ch, err)
		}
		for _, ev := range ch.Events {
			if ev.Kind == signals.KindHumanDirectMessage {
				humanSeqs[pr.child] = append(humanSeqs[pr.child], ev.Sequence)
			}
		}
		if want := noticeHumanMessages / len(pairs); len(humanSeqs[pr.child]) != want {
			t.Fatalf("%s: %d human events, want %d", pr.child, len(humanSeqs[pr.child]), want)
		}
	}

	// the notices, as the parents' transcripts hold them
	total, perGateway := 0, map[string]int{}
	for parent := range parents {
		chains := map[string][]uint64{}
		parts := map[string]int{}
		for _, m := range transcriptOf(t, d, parent) {
			if m.Marker != nil {
				parts[m.Marker.Run+"/"+m.Marker.Part]++
			}
			if m.Role != "user" || m.Provenance == nil || m.Provenance.Kind != "internal_system" {
				continue
			}
			k := noticeLine.FindStringSubmatch(m.Content)
			if k == nil {
				continue // a completion announce
			}
			if k[1] != k[2] {
				t.Fatalf("notice names two sessions: %s", m.Content)
			}
			since, _ := strconv.ParseUint(k[3], 10, 64)
			chains[k[1]] = append(chains[k[1]], since)
			rec, _, err := d.Runs.Get(bustest.Context(t), m.Marker.Run)
			if err != nil || rec.Status != runs.OK {
				t.Fatalf("notice run %s: %+v %v", m.Marker.Run, rec, err)
			}
			perGateway[rec.Gateway]++
			total++
		}
		for p, c := range parts {
			if c != 1 {
				t.Errorf("%s: %s appended %d times", parent, p, c)
			}
		}
		for _, pr := range pairs {
			if pr.parent != parent {
				continue
			}
			chain := chains[pr.child]
			delete(chains, pr.child)
			// the rules: the first notice says changesSince <seed>; each
			// acknowledgement moves lastSeen to what that notice reached
			// (a human event of the child), and a follow-up opens only
			// for material beyond it; at the end lastSeen is the last
			// human event. So the chain is seed < e_i < ... < head.
			events := map[uint64]bool{}
			for _, e := range humanSeqs[pr.child] {
				events[e] = true
			}
			if len(chain) == 0 || chain[0] != seeds[pr] {
				t.Errorf("%s -> %s: notices %v, want the first at changesSince %d", parent, pr.child, chain, seeds[pr])
				continue
			}
			reached := append(append([]uint64(nil), chain[1:]...), heads[pr])
			if !sort.SliceIsSorted(chain, func(i, j int) bool { return chain[i] < chain[j] }) {
				t.Errorf("%s -> %s: notices out of order %v", parent, pr.child, chain)
			}
			prev := chain[0]
			for _, r := range reached {
				if r <= prev || !events[r] {
					t.Errorf("%s -> %s: notices %v then head %d: %d is not a later human event of the child (%v)", parent, pr.child, chain, heads[pr], r, humanSeqs[pr.child])
				}
				prev = r
			}
		}
		for child, chain := range chains {
			t.Errorf("%s: notices about %s, which it does not watch: %v", parent, child, chain)
		}
	}
	if total < len(pairs) || total > noticeHumanMessages {
		t.Fatalf("%d notices for %d watched children and %d messages", total, len(pairs), noticeHumanMessages)
	}
	t.Logf("%d notices for %d human messages (coalesced), delivered per gateway %v; total %v", total, noticeHumanMessages, perGateway, time.Since(start0).Round(time.Millisecond))
}

type transcriptEntry struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	Provenance *struct {
		Kind string `json:"kind"`
	} `json:"provenance"`
	Marker *struct{ Run, Part string } `json:"__sessionbus"`
}

func transcriptOf(t *testing.T, d *handlers.Deps, session string) []transcriptEntry {
	t.Helper()
	entries := transcriptEntries(t, d.Transcripts, session)
	out := make([]transcriptEntry, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal(e.Data, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
