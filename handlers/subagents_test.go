package handlers_test

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// items returns the list's active and recent items keyed by session key.
func listOf(t *testing.T, s *handlerstest.Stack, as, params string) (map[string]any, map[string]map[string]any, map[string]map[string]any) {
	t.Helper()
	res := s.MustCall(as, "subagents", params)
	if res["status"] != "ok" || res["action"] != "list" {
		t.Fatalf("list: %v", res)
	}
	index := func(name string) map[string]map[string]any {
		out := map[string]map[string]any{}
		arr, ok := res[name].([]any)
		if !ok {
			t.Fatalf("list %s is not an array: %v", name, res[name])
		}
		for _, it := range arr {
			m := it.(map[string]any)
			out[m["sessionKey"].(string)] = m
		}
		return out
	}
	return res, index("active"), index("recent")
}

func TestSubagentsListStatusStrings(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now()
	running := spawn(t, s, child{parent: mainKey, label: "runner", task: "keep running", started: true})
	done := spawn(t, s, child{parent: mainKey, label: "finisher", task: "finisher"})
	failed := spawn(t, s, child{parent: mainKey, label: "breaker", task: "break things"})
	timedOut := spawn(t, s, child{parent: mainKey, label: "sleeper", task: "sleep long"})
	killed := spawn(t, s, child{parent: mainKey, label: "victim", task: "be killed"})
	waitingOne := spawn(t, s, child{parent: mainKey, label: "orchestrator one", task: "fan out"})
	waitingTwo := spawn(t, s, child{parent: mainKey, label: "orchestrator two", task: "fan out more"})
	finish(t, s, done.ChildSessionKey, subagents.OutcomeOK, now.Add(-time.Minute), delivered())
	finish(t, s, failed.ChildSessionKey, subagents.OutcomeError, now.Add(-2*time.Minute), delivered())
	finish(t, s, timedOut.ChildSessionKey, subagents.OutcomeTimeout, now.Add(-3*time.Minute),
		&subagents.Announce{State: subagents.AnnounceFailed, Error: "requester session is gone"})
	finish(t, s, killed.ChildSessionKey, subagents.OutcomeKilled, now.Add(-4*time.Minute), nil)
	// the two orchestrators ended, but their own children have not settled:
	// one still runs, one ended with its announce not yet delivered
	finish(t, s, waitingOne.ChildSessionKey, subagents.OutcomeOK, now.Add(-time.Minute), delivered())
	finish(t, s, waitingTwo.ChildSessionKey, subagents.OutcomeOK, now.Add(-time.Minute), delivered())
	gc1 := spawn(t, s, child{parent: waitingOne.ChildSessionKey, label: "grandchild", depth: 2})
	gc2 := spawn(t, s, child{parent: waitingTwo.ChildSessionKey, label: "g2a", depth: 2})
	gc3 := spawn(t, s, child{parent: waitingTwo.ChildSessionKey, label: "g2b", depth: 2})
	finish(t, s, gc3.ChildSessionKey, subagents.OutcomeOK, now.Add(-time.Minute), &subagents.Announce{State: subagents.AnnounceQueued})
	// a great-grandchild below gc1 counts for waitingOne too (recursive)
	spawn(t, s, child{parent: gc1.ChildSessionKey, label: "deep", depth: 3})

	res, active, recent := listOf(t, s, mainKey, `{}`)
	if res["requesterSessionKey"] != mainKey || res["callerSessionKey"] != mainKey || res["callerIsSubagent"] != false {
		t.Fatalf("caller fields: %v", res)
	}
	if res["total"] != float64(7) {
		t.Fatalf("total %v, want 7 (grandchildren belong to their own controller)", res["total"])
	}
	want := map[string]struct {
		status  string
		pending float64
		active  bool
	}{
		running.ChildSessionKey:    {"running", 0, true},
		waitingOne.ChildSessionKey: {"active (waiting on 2 children)", 2, true},
		waitingTwo.ChildSessionKey: {"active (waiting on 2 children)", 2, true},
		done.ChildSessionKey:       {"done", 0, false},
		failed.ChildSessionKey:     {"failed", 0, false},
		timedOut.ChildSessionKey:   {"timeout", 0, false},
		killed.ChildSessionKey:     {"killed", 0, false},
	}
	for key, w := range want {
		set := recent
		if w.active {
			set = active
		}
		it, ok := set[key]
		if !ok {
			t.Fatalf("%s not in the %v list; active %v recent %v", key, w.active, active, recent)
		}
		if it["status"] != w.status || it["pendingDescendants"] != w.pending {
			t.Errorf("%s: status %q pending %v, want %q %v", key, it["status"], it["pendingDescendants"], w.status, w.pending)
		}
	}
	if len(active) != 3 || len(recent) != 4 {
		t.Fatalf("active %d recent %d, want 3 and 4", len(active), len(recent))
	}
	// one child pending: singular
	finish(t, s, gc2.ChildSessionKey, subagents.OutcomeOK, now, delivered())
	_, active, _ = listOf(t, s, mainKey, `{}`)
	if got := active[waitingTwo.ChildSessionKey]["status"]; got != "active (waiting on 1 child)" {
		t.Fatalf("status %q, want active (waiting on 1 child)", got)
	}
	if got := active[waitingOne.ChildSessionKey]["childSessions"]; !reflect.DeepEqual(got, []any{gc1.ChildSessionKey}) {
		t.Fatalf("childSessions %v, want [%s]", got, gc1.ChildSessionKey)
	}
	// every delivered, skipped or failed announce settles the subtree
	finish(t, s, gc3.ChildSessionKey, subagents.OutcomeOK, now, &subagents.Announce{State: subagents.AnnounceSkipped})
	_, active, recent = listOf(t, s, mainKey, `{}`)
	if _, ok := recent[waitingTwo.ChildSessionKey]; !ok || active[waitingTwo.ChildSessionKey] != nil {
		t.Fatalf("settled orchestrator not recent: active %v", active)
	}
	if recent[waitingTwo.ChildSessionKey]["status"] != "done" {
		t.Fatalf("settled orchestrator status %v", recent[waitingTwo.ChildSessionKey]["status"])
	}
	// the announce outcome is visible per child, a lost one with its reason
	if a := recent[timedOut.ChildSessionKey]["announce"]; !reflect.DeepEqual(a, map[string]any{"state": "failed", "error": "requester session is gone"}) {
		t.Fatalf("announce of the timed-out child: %v", a)
	}
	if _, has := recent[killed.ChildSessionKey]["announce"]; has {
		t.Fatalf("a child with no announce yet shows one: %v", recent[killed.ChildSessionKey])
	}
}

func TestSubagentsListItemAndText(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now()
	longLabel := strings.Repeat("L", 60)
	longTask := "Summarize the quarterly numbers and then write a long report about them, including every table"
	a := spawn(t, s, child{parent: mainKey, label: longLabel, task: longTask, created: now.Add(-5 * time.Minute).UnixMilli(), started: true})
	b := spawn(t, s, child{parent: mainKey, label: "", task: "count sheep", created: now.Add(-90 * time.Minute).UnixMilli(), started: true})
	updateChild(t, s, b.ChildSessionKey, func(r *subagents.Record) {
		r.Model, r.InputTokens, r.OutputTokens, r.TotalTokens = "openai/gpt-x", 1200, 300, 40_000
	})
	finish(t, s, b.ChildSessionKey, subagents.OutcomeError, now.Add(-5*time.Minute), &subagents.Announce{State: subagents.AnnounceFailed, Error: "gave up after 3 attempts"})

	res, active, recent := listOf(t, s, mainKey, `{"recentMinutes": 60}`)
	ia := active[a.ChildSessionKey]
	wantLabel := strings.Repeat("L", 48) + "..."
	wantTask := longTask[:72] + "..."
	if ia["label"] != wantLabel || ia["task"] != wantTask || ia["index"] != float64(1) {
		t.Fatalf("item a: %v", ia)
	}
	// a running child's runtime counts up to now: 5m, or 5m1s on a slow run
	runtimeA, _ := ia["runtime"].(string)
	if !regexp.MustCompile(`^5m([1-9][0-9]?s)?$`).MatchString(runtimeA) || ia["runtimeMs"].(float64) < float64(5*time.Minute/time.Millisecond) {
		t.Fatalf("item a runtime: %v %v", ia["runtime"], ia["runtimeMs"])
	}
	if _, has := ia["endedAt"]; has {
		t.Fatalf("active item has endedAt: %v", ia)
	}
	ib := recent[b.ChildSessionKey]
	if ib["label"] != "count sheep" || ib["model"] != "openai/gpt-x" || ib["totalTokens"] != float64(40_000) ||
		ib["runtime"] != "1h25m" || ib["index"] != float64(2) || ib["endedAt"] == nil || ib["startedAt"] == nil {
		t.Fatalf("item b: %v", ib)
	}
	wantText := "active subagents:\n" +
		"1. " + wantLabel + " (model n/a, " + runtimeA + ") running - " + wantTask + "\n" +
		"\n" +
		"recent (last 60m):\n" +
		"2. count sheep (gpt-x, 1h25m, tokens 1.5k (in 1.2k / out 300), prompt/cache 40k) failed · announce failed: gave up after 3 attempts"
	if res["text"] != wantText {
		t.Fatalf("text:\n%s\nwant:\n%s", res["text"], wantText)
	}

	empty := s.MustCall("agent:main:other", "subagents", `{"action":"list"}`)
	if empty["text"] != "active subagents:\n(none)\n\nrecent (last 30m):\n(none)" || empty["total"] != float64(0) {
		t.Fatalf("empty list: %v", empty)
	}
	if act, _ := empty["active"].([]any); act == nil || len(act) != 0 {
		t.Fatalf("empty active must be [], got %v", empty["active"])
	}
}

func TestSubagentsRecentWindow(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now()
	ended := func(label string, ago time.Duration) string {
		c := spawn(t, s, child{parent: mainKey, label: label, created: now.Add(-ago - time.Minute).UnixMilli()})
		finish(t, s, c.ChildSessionKey, subagents.OutcomeOK, now.Add(-ago), delivered())
		return c.ChildSessionKey
	}
	k30s := ended("half a minute", 30*time.Second)
	k2m := ended("two minutes", 2*time.Minute)
	k45m := ended("45 minutes", 45*time.Minute)
	k1000m := ended("1000 minutes", 1000*time.Minute)
	k1500m := ended("1500 minutes", 1500*time.Minute)

	tests := []struct {
		params  string
		minutes float64
		in      []string
	}{
		{`{}`, 30, []string{k30s, k2m}},
		{`{"recentMinutes": 0}`, 30, []string{k30s, k2m}},
		{`{"recentMinutes": 60}`, 60, []string{k30s, k2m, k45m}},
		{`{"recent_minutes": "60"}`, 60, []string{k30s, k2m, k45m}},
		{`{"recentMinutes": 99999}`, 1440, []string{k30s, k2m, k45m, k1000m}},
		{`{"recentMinutes": -5}`, 1, []string{k30s}},
		{`{"recentMinutes": 1.9}`, 1, []string{k30s}},
	}
	for _, tt := range tests {
		res, _, recent := listOf(t, s, mainKey, tt.params)
		var got []string
		for _, k := range []string{k30s, k2m, k45m, k1000m, k1500m} {
			if recent[k] != nil {
				got = append(got, k)
			}
		}
		if !reflect.DeepEqual(got, tt.in) {
			t.Errorf("%s: recent %v, want %v", tt.params, got, tt.in)
		}
		if !strings.Contains(res["text"].(string), fmt.Sprintf("recent (last %vm):", tt.minutes)) {
			t.Errorf("%s: text header: %s", tt.params, res["text"])
		}
		if res["total"] != float64(5) {
			t.Errorf("%s: total %v", tt.params, res["total"])
		}
	}
	_, err := s.Call(mainKey, "subagents", `{"recentMinutes": "soon"}`)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != 400 || !strings.Contains(be.Message, "recentMinutes") {
		t.Fatalf("non-numeric recentMinutes: %v", err)
	}
}

// The resolution paths and their texts, through kill on finished children
// (which resolves and reports "already finished" without changing them).
func TestSubagentsTargetResolution(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now()
	var keys = map[string]string{}
	mk := func(label, runID string, ago time.Duration, active bool) {
		c := spawn(t, s, child{parent: mainKey, label: label, runID: runID, created: now.Add(-ago).UnixMilli(), started: true})
		if !active {
			finish(t, s, c.ChildSessionKey, subagents.OutcomeOK, now.Add(-ago/2), delivered())
		}
		keys[label+"#"+runID] = c.ChildSessionKey
	}
	mk("alpha", "aaa-111", 10*time.Minute, false)
	mk("alphabet", "aaa-222", 9*time.Minute, false)
	mk("beta", "bbb-333", 8*time.Minute, false)
	mk("dup", "ccc-444", 7*time.Minute, false)
	mk("dup", "ddd-555", 6*time.Minute, false)
	mk("zeta", "eee-666", time.Minute, false) // newest: "last"
	mk("old", "fff-777", 3*time.Hour, false)  // outside the recent window
	mk("live", "ggg-888", 20*time.Minute, true)

	resolvesTo := func(target, wantKey string) {
		t.Helper()
		res := s.MustCall(mainKey, "subagents", fmt.Sprintf(`{"action":"kill","target":%q}`, target))
		if res["sessionKey"] != wantKey {
			t.Errorf("target %q resolved to %v, want %s (%v)", target, res["sessionKey"], wantKey, res)
		}
		if wantKey != keys["live#ggg-888"] && (res["status"] != "done" || !strings.HasSuffix(res["text"].(string), " is already finished.")) {
			t.Errorf("target %q: %v", target, res)
		}
	}
	errorFor := func(target, status, want string) {
		t.Helper()
		res := s.MustCall(mainKey, "subagents", fmt.Sprintf(`{"action":"kill","target":%q}`, target))
		if res["status"] != status || res["error"] != want || res["action"] != "kill" || res["target"] != target {
			t.Errorf("target %q: %v, want %s %q", target, res, status, want)
		}
	}
	resolvesTo("last", keys["zeta#eee-666"])
	// numbering: active first, then recent, both newest first; "old" is out
	resolvesTo("2", keys["zeta#eee-666"])
	resolvesTo("7", keys["alpha#aaa-111"])
	errorFor("8", "error", "Invalid subagent index: 8")
	errorFor("0", "error", "Invalid subagent index: 0")
	resolvesTo(keys["beta#bbb-333"], keys["beta#bbb-333"])
	errorFor("agent:main:subagent:nobody", "error", "Unknown subagent session: agent:main:subagent:nobody")
	resolvesTo("ALPHA", keys["alpha#aaa-111"]) // exact label wins over the prefix of alphabet
	resolvesTo("alphab", keys["alphabet#aaa-222"])
	errorFor("alp", "error", "Ambiguous subagent label prefix: alp")
	errorFor("dup", "error", "Ambiguous subagent label: dup")
	errorFor("Du", "error", "Ambiguous subagent label prefix: Du")
	resolvesTo("bbb", keys["beta#bbb-333"])
	errorFor("aaa", "error", "Ambiguous subagent run id prefix: aaa")
	resolvesTo("ccc", keys["dup#ccc-444"])
	errorFor("nothing", "error", "Unknown subagent target: nothing")
	// the old child is still reachable by key, label and run id
	resolvesTo("old", keys["old#fff-777"])

	// someone else's child: the run exists, it is not the caller's
	other := spawn(t, s, child{parent: "agent:main:other"})
	errorFor(other.ChildSessionKey, "forbidden", "Subagents can only control runs spawned from their own session.")
	// and nobody has "last" without children
	res := s.MustCall("agent:main:lonely", "subagents", `{"action":"kill","target":"last"}`)
	if res["status"] != "error" || res["error"] != "Unknown subagent target." {
		t.Fatalf("last without children: %v", res)
	}

	// target is required for kill and steer: thrown, as OpenClaw's reader does
	for _, p := range []string{`{"action":"kill"}`, `{"action":"kill","target":"  "}`, `{"action":"steer","message":"x"}`} {
		_, err := s.Call(mainKey, "subagents", p)
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != 400 || be.Message != "target required" {
			t.Errorf("%s: %v, want 400 target required", p, err)
		}
	}
	res = s.MustCall(mainKey, "subagents", `{"action":"compact"}`)
	if !reflect.DeepEqual(res, map[string]any{"status": "error", "error": "Unsupported action."}) {
		t.Fatalf("unknown action: %v", res)
	}
}

func TestSubagentsKill(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now()
	a := spawn(t, s, child{parent: mainKey, label: "worker a"})
	res := s.MustCall(mainKey, "subagents", `{"action":"kill","target":"worker a"}`)
	want := map[string]any{"status": "ok", "action": "kill", "target": "worker a", "runId": a.RunID,
		"sessionKey": a.ChildSessionKey, "label": "worker a", "cascadeKilled": float64(0), "text": "killed worker a."}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("kill: %v\nwant %v", res, want)
	}
	if st := runStatus(t, s, a.RunID); st != runs.Killed {
		t.Fatalf("run record %q, want killed", st)
	}
	// the list shows the kill at once, before any gateway finalizes the record
	_, active, recent := listOf(t, s, mainKey, `{}`)
	if active[a.ChildSessionKey] != nil || recent[a.ChildSessionKey]["status"] != "killed" {
		t.Fatalf("after kill: active %v recent %v", active, recent)
	}
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"worker a"}`)
	if res["status"] != "done" || res["text"] != "worker a is already finished." {
		t.Fatalf("second kill: %v", res)
	}

	// a spawn that never reached the queue: killed before it ever runs
	lost := spawn(t, s, child{parent: mainKey, label: "unqueued", noQueue: true})
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"unqueued"}`)
	if res["status"] != "ok" || runStatus(t, s, lost.RunID) != runs.Killed {
		t.Fatalf("kill unqueued: %v, run %q", res, runStatus(t, s, lost.RunID))
	}

	// cascade: below a running child, and below one that already ended
	p1 := spawn(t, s, child{parent: mainKey, label: "parent one"})
	g1 := spawn(t, s, child{parent: p1.ChildSessionKey, label: "grand one", depth: 2})
	g1x := spawn(t, s, child{parent: g1.ChildSessionKey, label: "great grand", depth: 3})
	p2 := spawn(t, s, child{parent: mainKey, label: "parent two"})
	finish(t, s, p2.ChildSessionKey, subagents.OutcomeOK, now, delivered())
	g2 := spawn(t, s, child{parent: p2.ChildSessionKey, label: "grand two", depth: 2})
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"parent one"}`)
	if res["text"] != "killed parent one (+ 2 descendants)." || res["cascadeKilled"] != float64(2) ||
		!reflect.DeepEqual(res["cascadeLabels"], []any{"grand one", "great grand"}) {
		t.Fatalf("cascade kill: %v", res)
	}
	for _, r := range []*subagents.Record{p1, g1, g1x} {
		if st := runStatus(t, s, r.RunID); st != runs.Killed {
			t.Fatalf("%s: run %q, want killed", r.Label, st)
		}
	}
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"parent two"}`)
	if res["status"] != "ok" || res["text"] != "killed 1 descendant of parent two." || runStatus(t, s, g2.RunID) != runs.Killed {
		t.Fatalf("cascade below an ended child: %v", res)
	}
}

func TestSubagentsKillAll(t *testing.T) {
	s := handlerstest.Start(t, nil)
	x := spawn(t, s, child{parent: mainKey, label: "x"})
	y := spawn(t, s, child{parent: mainKey, label: "y"})
	yy := spawn(t, s, child{parent: y.ChildSessionKey, label: "yy", depth: 2})
	z := spawn(t, s, child{parent: mainKey, label: "z"})
	finish(t, s, z.ChildSessionKey, subagents.OutcomeOK, time.Now(), delivered())
	res := s.MustCall(mainKey, "subagents", `{"action":"kill","target":"*"}`)
	if res["status"] != "ok" || res["target"] != "all" || res["killed"] != float64(3) || res["text"] != "killed 3 subagents." {
		t.Fatalf("kill all: %v", res)
	}
	labels := fmt.Sprint(res["labels"])
	for _, l := range []string{"x", "y", "yy"} {
		if !strings.Contains(labels, l) {
			t.Fatalf("labels %s miss %s", labels, l)
		}
	}
	for _, r := range []*subagents.Record{x, y, yy} {
		if st := runStatus(t, s, r.RunID); st != runs.Killed {
			t.Fatalf("%s: %q", r.Label, st)
		}
	}
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"all"}`)
	if res["killed"] != float64(0) || res["text"] != "no running subagents to kill." {
		t.Fatalf("nothing left: %v", res)
	}
	spawn(t, s, child{parent: mainKey, label: "w"})
	res = s.MustCall(mainKey, "subagents", `{"action":"kill","target":"all"}`)
	if res["killed"] != float64(1) || res["text"] != "killed 1 subagent." {
		t.Fatalf("one: %v", res)
	}
}

// A leaf (depth at maxSpawnDepth) is denied the subagents tool by its
// tool set; given it back (tools.subagents.tools.alsoAllow) it may list,
// never kill or steer; with a deeper maxSpawnDepth the same caller is an
// orchestrator.
func TestSubagentsLeafAndOrchestrator(t *testing.T) {
	t.Run("leaf tool set", func(t *testing.T) {
		s := handlerstest.Start(t, nil)
		me := spawn(t, s, child{parent: mainKey, label: "me"})
		_, err := s.Call(me.ChildSessionKey, "subagents", `{}`)
		if e, ok := bus.AsError(err); !ok || e.Code != 403 || !strings.Contains(e.Message, "leaf deny list") {
			t.Fatalf("a leaf calling subagents: %v, want 403 naming the leaf deny list", err)
		}
	})
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprint("maxSpawnDepth=", depth), func(t *testing.T) {
			s := handlerstest.Start(t, func(c *config.Config) {
				c.Agents.Defaults.Subagents.MaxSpawnDepth = depth
				c.Tools.Subagents.Tools.AlsoAllow = []string{"subagents"}
			})
			me := spawn(t, s, child{parent: mainKey, label: "me"})
			mine := spawn(t, s, child{parent: me.ChildSessionKey, label: "mine", depth: 2})
			res, active, _ := listOf(t, s, me.ChildSessionKey, `{}`)
			if res["callerIsSubagent"] != true || active[mine.ChildSessionKey] == nil {
				t.Fatalf("leaf list: %v", res)
			}
			kill := s.MustCall(me.ChildSessionKey, "subagents", `{"action":"kill","target":"mine"}`)
			all := s.MustCall(me.ChildSessionKey, "subagents", `{"action":"kill","target":"all"}`)
			steer := s.MustCall(me.ChildSessionKey, "subagents", `{"action":"steer","target":"mine","message":"go"}`)
			if depth == 1 {
				leaf := "Leaf subagents cannot control other sessions."
				if kill["status"] != "forbidden" || kill["error"] != leaf || kill["runId"] != mine.RunID ||
					all["status"] != "forbidden" || all["error"] != leaf || all["target"] != "all" ||
					steer["status"] != "forbidden" || steer["error"] != leaf {
					t.Fatalf("leaf: kill %v all %v steer %v", kill, all, steer)
				}
				if st := runStatus(t, s, mine.RunID); st != runs.Pending {
					t.Fatalf("a refused kill changed the run: %q", st)
				}
				return
			}
			if kill["status"] != "ok" || all["text"] != "no running subagents to kill." || steer["status"] != "done" {
				t.Fatalf("orchestrator: kill %v all %v steer %v", kill, all, steer)
			}
		})
	}
}

func TestSubagentsSteer(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	c := spawn(t, s, child{parent: mainKey, label: "researcher", started: true})
	entry := d.Index.Get(c.ChildSessionKey)

	res := s.MustCall(mainKey, "subagents", `{"action":"steer","target":"researcher","message":"focus on the 2025 numbers"}`)
	newRun, _ := res["runId"].(string)
	want := map[string]any{"status": "accepted", "action": "steer", "target": "researcher", "runId": newRun,
		"sessionKey": c.ChildSessionKey, "sessionId": entry.SessionID, "mode": "restart", "label": "researcher", "text": "steered researcher."}
	if !reflect.DeepEqual(res, want) || newRun == "" || newRun == c.RunID {
		t.Fatalf("steer: %v\nwant %v", res, want)
	}
	// the registry took the new run (so the old one announces nothing), the
	// old run is killed, the new one queued in the child's session
	rec, _, err := d.Subagents.Get(bustest.Context(t), c.ChildSessionKey)
	if err != nil {
		t.Fatal(err)
	}
	if rec.RunID != newRun || !rec.Queued || rec.StartedAt != 0 || rec.EndedAt != 0 || rec.Request == nil ||
		rec.Request.Message != "focus on the 2025 numbers" || rec.Request.Prompt != "focus on the 2025 numbers" ||
		rec.Request.Lane != "subagent" || rec.Request.SessionKey != c.ChildSessionKey {
		t.Fatalf("registry after steer: %+v req %+v", rec, rec.Request)
	}
	if st := runStatus(t, s, c.RunID); st != runs.Killed {
		t.Fatalf("old run %q, want killed", st)
	}
	if st := runStatus(t, s, newRun); st != runs.Pending {
		t.Fatalf("new run %q, want pending", st)
	}
	if n := queued(t, s); n != 2 {
		t.Fatalf("%d runs queued, want the spawn's and the steer's", n)
	}
	_, active, _ := listOf(t, s, mainKey, `{}`)
	if it := active[c.ChildSessionKey]; it == nil || it["runId"] != newRun || it["status"] != "running" {
		t.Fatalf("list after steer: %v", active)
	}

	// at most one steer per caller and child every 2 s, across workers (the
	// limiter is a claim on the bus)
	res = s.MustCall(mainKey, "subagents", `{"action":"steer","target":"researcher","message":"again"}`)
	if res["status"] != "rate_limited" || res["error"] != "Steer rate limit exceeded. Wait a moment before sending another steer." ||
		res["runId"] != newRun || res["sessionKey"] != c.ChildSessionKey {
		t.Fatalf("second steer: %v", res)
	}
	// the limit lapses by itself (the claim's TTL); the wait reads the
	// claim, not the tool, so it spends none of the caller's tool calls
	limitKey := "steer." + bus.EncodeKey(mainKey) + "." + bus.EncodeKey(c.ChildSessionKey)
	bustest.WaitFor(t, 15*time.Second, "the steer rate limit to expire", func() bool {
		_, err := d.Claims.Get(bustest.Context(t), limitKey)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	later := s.MustCall(mainKey, "subagents", `{"action":"steer","target":"researcher","message":"again"}`)
	if later["status"] != "accepted" || later["runId"] == newRun {
		t.Fatalf("steer after the limit: %v", later)
	}

	// message limits, in OpenClaw's order: required (thrown), then length
	long := strings.Repeat("x", 4001)
	res = s.MustCall(mainKey, "subagents", `{"action":"steer","target":"nobody","message":"`+long+`"}`)
	if res["status"] != "error" || res["error"] != "Message too long (4001 chars, max 4000)." || res["target"] != "nobody" {
		t.Fatalf("too long: %v", res)
	}
	other := spawn(t, s, child{parent: mainKey, label: "other"})
	res = s.MustCall(mainKey, "subagents", `{"action":"steer","target":"other","message":"`+strings.Repeat("é", 4000)+`"}`)
	if res["status"] != "accepted" {
		t.Fatalf("4000 characters: %v", res)
	}
	_, err = s.Call(mainKey, "subagents", `{"action":"steer","target":"other"}`)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != 400 || be.Message != "message required" {
		t.Fatalf("no message: %v", err)
	}

	// a finished child is not restarted
	finish(t, s, other.ChildSessionKey, subagents.OutcomeOK, time.Now(), delivered())
	res = s.MustCall(mainKey, "subagents", `{"action":"steer","target":"other","message":"more"}`)
	if res["status"] != "done" || res["text"] != "other is already finished." {
		t.Fatalf("steer finished: %v", res)
	}
}

// A sub-agent that controls its own session (an orchestrator listed under
// itself) is refused: it cannot steer itself.
func TestSubagentsSelfSteer(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Agents.Defaults.Subagents.MaxSpawnDepth = 2 })
	self := "agent:main:subagent:self"
	spawn(t, s, child{parent: self, key: self, label: "myself"})
	res := s.MustCall(self, "subagents", `{"action":"steer","target":"myself","message":"go"}`)
	if res["status"] != "forbidden" || res["error"] != "Subagents cannot steer themselves." || res["sessionKey"] != self {
		t.Fatalf("self steer: %v", res)
	}
}
