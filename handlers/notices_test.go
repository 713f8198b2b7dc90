package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/transcripts/transcriptstest"
)

// Parent notices end to end: a worker (sessions_spawn, the ingress,
// session_status, sessions_send) and real gateways on one server, every
// agent on the script runtime.

const noticeParent = "agent:main:main"

type noticeStack struct {
	*handlerstest.Stack
}

func startNotices(t *testing.T, edit func(*config.Config)) *noticeStack {
	t.Helper()
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": `changed \(other actor\)`, "reply": "reconciled"},
			map[string]any{"reply": "ok"},
		}}}}
		c.Bus.SubagentSweepInterval = 200 * time.Millisecond
		if edit != nil {
			edit(c)
		}
	})
	return &noticeStack{Stack: s}
}

// gateway starts a gateway on its own connection; stopped at cleanup (and
// Stop may be called before).
func (s *noticeStack) gateway(id string) *gateway.Gateway {
	s.T.Helper()
	nc, _ := bustest.Connect(s.T, s.Server)
	return gatewaytest.Start(s.T, s.Stack, nc, id, nil, gateway.Options{})
}

// spawn spawns a child of as through sessions_spawn and waits until its
// first run seeded as's cursor on it (child_spawned).
func (s *noticeStack) spawn(as string) (child string, seed uint64) {
	s.T.Helper()
	res := s.MustCall(as, "sessions_spawn", `{"task":"watch the logs"}`)
	child, _ = res["childSessionKey"].(string)
	if res["status"] != "accepted" || child == "" {
		s.T.Fatalf("sessions_spawn: %v", res)
	}
	c := s.waitCursor(as, child, "seeded by child_spawned", func(c *watchers.Cursor) bool { return true })
	if c.Provenance != watchers.Implicit || c.LastSeenSequence == 0 || c.NotifiedSequence != c.LastSeenSequence || c.MaterialSequence != c.LastSeenSequence {
		s.T.Fatalf("seeded cursor %+v", c)
	}
	return child, c.LastSeenSequence
}

func (s *noticeStack) cursor(watcher, target string) *watchers.Cursor {
	s.T.Helper()
	c, err := s.Worker.Deps.Watchers.Get(bustest.Context(s.T), watcher, target)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		s.T.Fatal(err)
	}
	return c
}

func (s *noticeStack) waitCursor(watcher, target, what string, ok func(*watchers.Cursor) bool) *watchers.Cursor {
	s.T.Helper()
	var c *watchers.Cursor
	bustest.WaitFor(s.T, 30*time.Second, what, func() bool {
		c = s.cursor(watcher, target)
		return c != nil && ok(c)
	})
	return c
}

// settled waits until watcher has acknowledged everything material about
// target up to at least material.
func (s *noticeStack) settled(watcher, target string, material uint64) *watchers.Cursor {
	s.T.Helper()
	return s.waitCursor(watcher, target, fmt.Sprintf("%s acknowledged %s up to %d", watcher, target, material), func(c *watchers.Cursor) bool {
		return c.MaterialSequence >= material && c.LastSeenSequence == c.MaterialSequence && c.NotifiedSequence == c.MaterialSequence
	})
}

// human sends one human turn into session through the ingress (not
// waiting for its run).
func (s *noticeStack) human(session, text string) string {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"sessionKey": session, "channel": "telegram", "from": "user42", "text": text})
	data, err := bus.Inbound(ctx, s.Conn, s.Worker.Deps.Names, s.Token(bus.Caller{Adapter: "telegram"}), body)
	if err != nil {
		s.T.Fatalf("inbound to %s: %v", session, err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil || out["status"] != "accepted" {
		s.T.Fatalf("inbound reply %s (%v)", data, err)
	}
	return out["runId"].(string)
}

func (s *noticeStack) transcript(key string) []map[string]any {
	s.T.Helper()
	return transcriptstest.Transcript[map[string]any](s.T, s.Worker.Deps.Transcripts, key, 200)
}

// notices are the notice prompts (internal_system user turns naming a
// changed session) in key's transcript, in order.
func (s *noticeStack) notices(key string) []string {
	s.T.Helper()
	var out []string
	for _, m := range s.transcript(key) {
		p, _ := m["provenance"].(map[string]any)
		text, _ := m["content"].(string)
		if m["role"] == "user" && p != nil && p["kind"] == "internal_system" && strings.Contains(text, "changed (other actor)") {
			out = append(out, text)
		}
	}
	return out
}

// waitRuns waits until every run of session is terminal (nothing queued
// or running there).
func (s *noticeStack) waitIdle(key string, prompts int) {
	s.T.Helper()
	bustest.WaitFor(s.T, 30*time.Second, fmt.Sprintf("%d notice turns of %s answered", prompts, key), func() bool {
		n, replies := 0, 0
		for _, m := range s.transcript(key) {
			if text, _ := m["content"].(string); m["role"] == "user" && strings.Contains(text, "changed (other actor)") {
				n++
			} else if m["role"] == "assistant" && text == "reconciled" {
				replies++
			}
		}
		return n == prompts && replies == prompts
	})
}

// noticeText is the reference's notice (§6.6), spelled out here on purpose.
func noticeText(target string, since uint64) string {
	return fmt.Sprintf(`Session "%s" changed (other actor). Reconcile before acting: session_status sessionKey "%s" changesSince %d.`, target, target, since)
}

// humanEvents is the human_direct_message sequences of target after since,
// read the way the parent is told to: session_status changesSince.
func (s *noticeStack) humanEvents(as, target string, since uint64) (seqs []uint64, res map[string]any) {
	s.T.Helper()
	res = s.MustCall(as, "session_status", fmt.Sprintf(`{"sessionKey":%q,"changesSince":%d}`, target, since))
	sc, _ := res["stateChanges"].(map[string]any)
	evs, _ := sc["events"].([]any)
	for _, e := range evs {
		m := e.(map[string]any)
		if m["kind"] == "human_direct_message" {
			seqs = append(seqs, uint64(m["sequence"].(float64)))
		}
	}
	return seqs, res
}

// TestNoticeWakesMainParent: a child spawned by the main session seeds its
// cursor; one human turn into the child wakes the parent with exactly one
// run carrying the reference's text, acknowledged after it ran; the
// parent's session_status changesSince shows the event.
func TestNoticeWakesMainParent(t *testing.T) {
	s := startNotices(t, nil)
	s.gateway("gw1")
	child, seed := s.spawn(noticeParent)
	// the spawn run is over (its run_completed logged) before the human
	// turn, so the human turn is the child's newest event
	bustest.WaitFor(t, 20*time.Second, "the announce turn in the parent", func() bool { return len(s.transcript(noticeParent)) >= 2 })

	s.human(child, "are you there?")
	s.waitIdle(noticeParent, 1)
	c := s.settled(noticeParent, child, seed+1)
	if got := s.notices(noticeParent); len(got) != 1 || got[0] != noticeText(child, seed) {
		t.Fatalf("notices %q, want exactly [%q]", got, noticeText(child, seed))
	}
	seqs, res := s.humanEvents(noticeParent, child, seed)
	sc := res["stateChanges"].(map[string]any)
	if len(seqs) != 1 || seqs[0] != c.MaterialSequence || res["stateVersion"] != float64(c.MaterialSequence) ||
		sc["historyGap"] != false || sc["truncated"] != false {
		t.Fatalf("session_status changesSince %d: %v (cursor %+v)", seed, res, c)
	}
	ev := sc["events"].([]any)
	var human map[string]any
	for _, e := range ev {
		if m := e.(map[string]any); m["kind"] == "human_direct_message" {
			human = m
		}
	}
	if human["actorType"] != "human" || human["summary"] != "human message via telegram" ||
		fmt.Sprint(human["payload"]) != "map[channel:telegram]" {
		t.Fatalf("human_direct_message as projected: %v", human)
	}
	if !strings.Contains(res["statusText"].(string), "Session state changes:") {
		t.Fatalf("status card without the state changes block:\n%s", res["statusText"])
	}
	// the child's own session had its turn too (the notice is not the turn)
	bustest.WaitFor(t, 20*time.Second, "the child's reply", func() bool {
		for _, m := range s.transcript(child) {
			if m["role"] == "user" && m["content"] == "are you there?" {
				return true
			}
		}
		return false
	})
}

// TestNoticeCoalescesAndSurvivesRestart: with every gateway stopped, three
// human turns into the child open one notice (material raised, notified
// frozen at the first). Two new gateways start: the start-up sweep
// delivers it exactly once, its acknowledgement opens exactly one
// follow-up (changesSince the first event), and that is all.
func TestNoticeCoalescesAndSurvivesRestart(t *testing.T) {
	s := startNotices(t, nil)
	g1 := s.gateway("gw1")
	child, seed := s.spawn(noticeParent)
	// the child's completion announce has run in the parent: nothing of
	// the spawn is left in flight when the gateway goes
	bustest.WaitFor(t, 20*time.Second, "the announce turn in the parent", func() bool { return len(s.transcript(noticeParent)) >= 2 })
	g1.Stop()

	for i := range 3 {
		s.human(child, fmt.Sprintf("message %d", i))
	}
	seqs, _ := s.humanEvents(noticeParent, child, seed)
	if len(seqs) != 3 {
		t.Fatalf("human events after %d: %v", seed, seqs)
	}
	c := s.cursor(noticeParent, child)
	if c.LastSeenSequence != seed || c.NotifiedSequence != seqs[0] || c.MaterialSequence != seqs[2] {
		t.Fatalf("while no gateway runs: cursor %+v, want lastSeen %d notified %d material %d", c, seed, seqs[0], seqs[2])
	}
	if got := s.notices(noticeParent); len(got) != 0 {
		t.Fatalf("notices with no gateway running: %q", got)
	}

	s.gateway("gw2")
	s.gateway("gw3")
	s.waitIdle(noticeParent, 2)
	s.settled(noticeParent, child, seqs[2])
	want := []string{noticeText(child, seed), noticeText(child, seqs[0])}
	if got := s.notices(noticeParent); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notices %q, want %q", got, want)
	}
}

// TestNoticeFollowUpWhileNoticeRuns: turns arriving while the parent's
// notice run is held up make exactly one follow-up after it drains. The
// parent's lane is held by a slow turn so that the notice cannot drain
// before the later human turns are in.
func TestNoticeFollowUpWhileNoticeRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	s := startNotices(t, func(c *config.Config) {
		c.Agents.List[0].Script["rules"] = append([]any{map[string]any{"match": "^hold", "delayMs": 2000, "reply": "held"}}, c.Agents.List[0].Script["rules"].([]any)...)
	})
	s.gateway("gw1")
	child, seed := s.spawn(noticeParent)
	bustest.WaitFor(t, 20*time.Second, "the announce turn in the parent", func() bool { return len(s.transcript(noticeParent)) >= 2 })

	// occupy the parent's lane; the notice run queues behind this turn
	hold := s.human(noticeParent, "hold on")
	s.human(child, "first")
	c := s.waitCursor(noticeParent, child, "the first notice open", func(c *watchers.Cursor) bool { return c.Pending() })
	s.human(child, "second")
	s.human(child, "third")
	seqs, _ := s.humanEvents(noticeParent, child, seed)
	if len(seqs) != 3 || c.NotifiedSequence != seqs[0] {
		t.Fatalf("events %v, cursor %+v", seqs, c)
	}
	s.waitIdle(noticeParent, 2)
	s.settled(noticeParent, child, seqs[2])
	// the notices ran after the held turn (the lane), and the held turn
	// finished before the first notice could be acknowledged
	rec, _, err := s.Worker.Deps.Runs.Get(bustest.Context(t), hold)
	if err != nil || !rec.Terminal() {
		t.Fatalf("held run %+v %v", rec, err)
	}
	want := []string{noticeText(child, seed), noticeText(child, seqs[0])}
	if got := s.notices(noticeParent); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notices %q, want %q", got, want)
	}
}

// TestSessionsSendWatch: watch:true registers the sender as an explicit
// watcher seeded at the target's head (history never notifies), answers
// watched:true, and a later human turn notifies it; watching oneself
// answers watched:false and registers nothing; without watch the result
// has no watched field.
func TestSessionsSendWatch(t *testing.T) {
	s := startNotices(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		c.Session.AgentToAgent.MaxPingPongTurns = 0
	})
	s.gateway("gw1")
	const target = "agent:main:telegram:dm:7"
	const watcher = "agent:main:work"
	now := time.Now().UnixMilli()
	for _, k := range []string{target, watcher} {
		s.Put(&sessions.Entry{Key: k, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	}
	// history before the watch: a human turn into a session nobody
	// watches and without a parent is not logged
	s.human(target, "before anyone watched")
	if seqs, res := s.humanEvents(noticeParent, target, 0); len(seqs) != 0 || res["stateVersion"] != float64(0) {
		t.Fatalf("unwatched human turn logged: %v", res)
	}

	res := s.MustCall(watcher, "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"hello","timeoutSeconds":0}`, target))
	if _, has := res["watched"]; has {
		t.Fatalf("watched without watch: %v", res)
	}
	res = s.MustCall(watcher, "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"hello","timeoutSeconds":0,"watch":true}`, target))
	if res["watched"] != true {
		t.Fatalf("watch:true: %v", res)
	}
	c := s.cursor(watcher, target)
	if c == nil || c.Provenance != watchers.Explicit || c.Pending() || c.MaterialSequence != c.LastSeenSequence {
		t.Fatalf("explicit cursor %+v", c)
	}
	head := c.LastSeenSequence
	res = s.MustCall(target, "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"me","timeoutSeconds":0,"watch":true}`, target))
	if res["watched"] != false || s.cursor(target, target) != nil {
		t.Fatalf("self-watch: %v", res)
	}

	s.human(target, "now watched")
	s.waitCursor(watcher, target, "the human turn marked", func(c *watchers.Cursor) bool { return c.MaterialSequence > head })
	s.waitIdle(watcher, 1)
	c = s.settled(watcher, target, head+1)
	if got := s.notices(watcher); len(got) != 1 || got[0] != noticeText(target, head) {
		t.Fatalf("notices %q, want [%q]", got, noticeText(target, head))
	}
	// re-registering with nothing pending keeps the cursor where it is
	res = s.MustCall(watcher, "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"again","timeoutSeconds":0,"watch":true}`, target))
	if c2 := s.cursor(watcher, target); res["watched"] != true || c2.LastSeenSequence != c.LastSeenSequence || c2.MaterialSequence != c.MaterialSequence {
		t.Fatalf("re-registration moved the cursor: %+v -> %+v (%v)", c, c2, res)
	}
}
