package signals

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func openLog(t *testing.T, opts ...Option) (*Log, context.Context) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	l, err := Open(ctx, js, bus.NewNames(""), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, ctx
}

func appendOne(t *testing.T, ctx context.Context, l *Log, key, kind, dedupe string) Event {
	t.Helper()
	ev, dup, err := l.Append(ctx, Event{SessionKey: key, Kind: kind, ActorType: ActorHuman, DedupeKey: dedupe, Summary: "human message via telegram", Payload: map[string]any{"channel": "telegram"}})
	if err != nil || dup {
		t.Fatalf("append %s to %s: dup=%v err=%v", kind, key, dup, err)
	}
	return ev
}

func seqsOf(evs []Event) []uint64 {
	out := []uint64{}
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

func TestAppendDedupe(t *testing.T) {
	l, ctx := openLog(t)
	key := "agent:main:subagent:a"
	first := appendOne(t, ctx, l, key, KindHumanDirectMessage, "human:m1")
	if first.Sequence == 0 {
		t.Fatal("no sequence")
	}
	again, dup, err := l.Append(ctx, Event{SessionKey: key, Kind: KindHumanDirectMessage, ActorType: ActorHuman, DedupeKey: "human:m1", Summary: "a different summary"})
	if err != nil || !dup {
		t.Fatalf("repeat: dup=%v err=%v", dup, err)
	}
	if again.Sequence != first.Sequence || again.Summary != first.Summary {
		t.Fatalf("a duplicate returns the stored event: got %+v want %+v", again, first)
	}
	if v, _ := l.StateVersion(ctx, key); v != first.Sequence {
		t.Fatalf("stateVersion %d, want %d", v, first.Sequence)
	}
	c, err := l.Since(ctx, key, 0, 200)
	if err != nil || len(c.Events) != 1 {
		t.Fatalf("one stored event: %+v %v", c, err)
	}
	if _, _, err := l.Append(ctx, Event{Kind: KindCompacted}); err == nil {
		t.Fatal("an event without a session key was accepted")
	}
}

func TestOccurredAtClampAndSummary(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	l, ctx := openLog(t, withClock(func() time.Time { return now }))
	day := (24 * time.Hour).Milliseconds()
	cases := []struct{ in, want int64 }{
		{0, now.UnixMilli()},
		{now.UnixMilli() + 5000, now.UnixMilli()},
		{now.UnixMilli() - 2*day, now.UnixMilli() - day},
		{now.UnixMilli() - 1000, now.UnixMilli() - 1000},
	}
	for i, c := range cases {
		ev, _, err := l.Append(ctx, Event{SessionKey: "agent:main:main", Kind: KindCompacted, ActorType: ActorSystem, OccurredAt: c.in,
			DedupeKey: fmt.Sprintf("compacted:%d", i), Summary: "session\ncompacted  \t now"})
		if err != nil {
			t.Fatal(err)
		}
		if ev.OccurredAt != c.want || ev.Summary != "session compacted now" {
			t.Fatalf("occurredAt %d -> %d (want %d), summary %q", c.in, ev.OccurredAt, c.want, ev.Summary)
		}
	}
	c, err := l.Since(ctx, "agent:main:main", 0, 200)
	if err != nil || len(c.Events) != len(cases) || c.Events[2].OccurredAt != now.UnixMilli()-day {
		t.Fatalf("stored: %+v %v", c, err)
	}
}

func TestSinceLimitTruncatedAndProjection(t *testing.T) {
	l, ctx := openLog(t)
	a, b := "agent:main:subagent:a", "agent:main:subagent:b"
	var as []uint64
	for i := range 90 { // > BackLinks, interleaved with another session
		as = append(as, appendOne(t, ctx, l, a, KindHumanDirectMessage, fmt.Sprintf("a%d", i)).Sequence)
		appendOne(t, ctx, l, b, KindGoalChanged, fmt.Sprintf("b%d", i))
	}
	if v, _ := l.StateVersion(ctx, a); v != as[len(as)-1] {
		t.Fatalf("stateVersion %d want %d", v, as[len(as)-1])
	}
	for _, tc := range []struct {
		after uint64
		limit int
		want  []uint64
		trunc bool
	}{
		{0, 200, as, false},
		{0, 0, as[:1], true}, // clamped up to 1
		{0, 1000, as, false}, // clamped down to 200
		{as[9], 5, as[10:15], true},
		{as[84], 5, as[85:], false},
		{as[89], 5, nil, false},
		{as[89] + 1000, 5, nil, false},
		{as[40] + 1, 3, as[41:44], true}, // a version that is another session's sequence
	} {
		c, err := l.Since(ctx, a, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqsOf(c.Events), append([]uint64{}, tc.want...)) || c.Truncated != tc.trunc || c.HistoryGap || c.EarliestAvailableSequence != as[0] {
			t.Fatalf("since %d limit %d: got %v trunc=%v gap=%v earliest=%d", tc.after, tc.limit, seqsOf(c.Events), c.Truncated, c.HistoryGap, c.EarliestAvailableSequence)
		}
	}

	// the tool projection
	ev := Event{Sequence: 7, DedupeKey: "d", SessionKey: a, SessionID: "s", AgentID: "main", Kind: KindRunFailed, ActorType: ActorSystem, RunID: "r1",
		OccurredAt: 5, Summary: "child run timed out", Payload: map[string]any{"outcome": "timeout", "channel": "slack", "turns": float64(3), "text": "secret", "extra": 1}}
	got, _ := json.Marshal(Project(ev))
	want := `{"actorType":"system","kind":"run_failed","occurredAt":5,"payload":{"channel":"slack","outcome":"timeout","turns":3},"runId":"r1","sequence":7,"summary":"child run timed out"}`
	if string(got) != want {
		t.Fatalf("projection\n got %s\nwant %s", got, want)
	}
	ev.Payload = map[string]any{"outcome": "exploded", "channel": 3, "turns": 0}
	if p := Project(ev); p["payload"] != nil {
		t.Fatalf("invalid payload fields kept: %v", p["payload"])
	}
	got, _ = json.Marshal(ProjectChanges(Changes{Events: []Event{{Sequence: 1, Kind: KindCompacted, ActorType: ActorSystem, Summary: "session compacted"}}, EarliestAvailableSequence: 1}))
	want = `{"earliestAvailableSequence":1,"events":[{"actorType":"system","kind":"compacted","occurredAt":0,"sequence":1,"summary":"session compacted"}],"historyGap":false,"truncated":false}`
	if string(got) != want {
		t.Fatalf("changes projection\n got %s\nwant %s", got, want)
	}
}

// TestHistoryGapForcedPruning: the stream itself prunes (MaxMsgs 10), with
// sessions interleaved; historyGap is true exactly when the version predates
// the session's retained history.
func TestHistoryGapForcedPruning(t *testing.T) {
	const maxMsgs = 10
	l, ctx := openLog(t, WithMaxMsgs(maxMsgs))
	keys := map[byte]string{'A': "agent:main:subagent:a", 'B': "agent:main:subagent:b", 'C': "agent:main:subagent:c", 'D': "agent:main:subagent:d"}
	// seq: 1 C, 2 A, 3 B, 4 A, 5 B, 6 A, 7-14 B, 15 A, 16 A. Retained: 7-16.
	order := "CABABABBBBBBBBAA"
	seqs := map[byte][]uint64{}
	for i := range len(order) {
		ev := appendOne(t, ctx, l, keys[order[i]], KindHumanDirectMessage, fmt.Sprintf("m%d", i))
		if ev.Sequence != uint64(i+1) {
			t.Fatalf("sequence %d, want %d", ev.Sequence, i+1)
		}
		seqs[order[i]] = append(seqs[order[i]], ev.Sequence)
	}
	for _, tc := range []struct {
		name     string
		key      byte
		after    uint64
		limit    int
		want     []uint64
		trunc    bool
		earliest uint64
		gap      bool
	}{
		{"A from 0", 'A', 0, 200, []uint64{15, 16}, false, 15, true},
		{"A before its newest pruned", 'A', 5, 200, []uint64{15, 16}, false, 15, true},
		{"A at its newest pruned", 'A', 6, 200, []uint64{15, 16}, false, 15, false},
		{"A at another session's seq", 'A', 10, 200, []uint64{15, 16}, false, 15, false},
		{"A mid", 'A', 15, 200, []uint64{16}, false, 15, false},
		{"A at head", 'A', 16, 200, []uint64{}, false, 15, false},
		{"B from 4", 'B', 4, 200, []uint64{7, 8, 9, 10, 11, 12, 13, 14}, false, 7, true},
		{"B from 5", 'B', 5, 200, []uint64{7, 8, 9, 10, 11, 12, 13, 14}, false, 7, false},
		{"B truncated with gap", 'B', 0, 3, []uint64{7, 8, 9}, true, 7, true},
		{"B truncated", 'B', 10, 2, []uint64{11, 12}, true, 7, false},
		{"C all pruned, from 0", 'C', 0, 200, []uint64{}, false, 2, true},
		{"C all pruned, at head", 'C', 1, 200, []uint64{}, false, 2, false},
		{"D never written", 'D', 0, 200, []uint64{}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := l.Since(ctx, keys[tc.key], tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqsOf(c.Events), tc.want) || c.Truncated != tc.trunc || c.EarliestAvailableSequence != tc.earliest || c.HistoryGap != tc.gap {
				t.Fatalf("got %v trunc=%v earliest=%d gap=%v", seqsOf(c.Events), c.Truncated, c.EarliestAvailableSequence, c.HistoryGap)
			}
		})
	}
	// heads survive pruning
	for k, want := range map[byte]uint64{'A': 16, 'B': 14, 'C': 1, 'D': 0} {
		if v, err := l.StateVersion(ctx, keys[k]); err != nil || v != want {
			t.Fatalf("stateVersion %c = %d (%v), want %d", k, v, err, want)
		}
	}
	// C's next event after total pruning: the gap stays exact
	c1 := appendOne(t, ctx, l, keys['C'], KindGoalChanged, "c-again").Sequence
	for after, gap := range map[uint64]bool{0: true, 1: false, c1: false} {
		c, err := l.Since(ctx, keys['C'], after, 200)
		wantEvents := []uint64{c1}
		if after == c1 {
			wantEvents = []uint64{}
		}
		if err != nil || c.HistoryGap != gap || !slices.Equal(seqsOf(c.Events), wantEvents) {
			t.Fatalf("C after %d: %+v %v (want gap %v)", after, c, err, gap)
		}
	}
}

// TestHistoryGapExhaustive checks every version against the ground truth
// (MaxMsgs keeps the newest N stream sequences) with long chains, so the walk
// back jumps through many Sb-Back links.
func TestHistoryGapExhaustive(t *testing.T) {
	const maxMsgs = 150
	l, ctx := openLog(t, WithMaxMsgs(maxMsgs))
	a, b := "agent:main:subagent:a", "agent:main:subagent:b"
	var as []uint64
	total := uint64(0)
	for i := range 100 {
		as = append(as, appendOne(t, ctx, l, a, KindHumanDirectMessage, fmt.Sprintf("a%d", i)).Sequence)
		total = appendOne(t, ctx, l, b, KindHumanDirectMessage, fmt.Sprintf("b%d", i)).Sequence
	}
	firstRetained := total - maxMsgs + 1
	var prunedMax uint64
	var retained []uint64
	for _, s := range as {
		if s < firstRetained {
			prunedMax = s
		} else {
			retained = append(retained, s)
		}
	}
	for _, limit := range []int{7, 200} {
		for after := uint64(0); after <= total+1; after++ {
			want := []uint64{}
			for _, s := range retained {
				if s > after {
					want = append(want, s)
				}
			}
			trunc := len(want) > limit
			want = want[:min(len(want), limit)]
			c, err := l.Since(ctx, a, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if c.HistoryGap != (after < prunedMax) || !slices.Equal(seqsOf(c.Events), want) || c.Truncated != trunc || c.EarliestAvailableSequence != retained[0] {
				t.Fatalf("after %d limit %d: got %v trunc=%v gap=%v earliest=%d; want %v trunc=%v gap=%v earliest=%d",
					after, limit, seqsOf(c.Events), c.Truncated, c.HistoryGap, c.EarliestAvailableSequence, want, trunc, after < prunedMax, retained[0])
			}
		}
	}
}

// TestHistoryGapMaxAge: the stream's MaxAge prunes everything; heads and the
// watermark survive it.
func TestHistoryGapMaxAge(t *testing.T) {
	l, ctx := openLog(t, WithMaxAge(time.Second))
	a := "agent:main:subagent:a"
	appendOne(t, ctx, l, a, KindHumanDirectMessage, "a1")
	h := appendOne(t, ctx, l, a, KindHumanDirectMessage, "a2").Sequence
	bustest.WaitFor(t, 30*time.Second, "MaxAge to empty the stream", func() bool {
		info, err := l.Stream().Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	if v, _ := l.StateVersion(ctx, a); v != h {
		t.Fatalf("stateVersion %d after pruning, want %d", v, h)
	}
	for after, gap := range map[uint64]bool{0: true, h - 1: true, h: false} {
		c, err := l.Since(ctx, a, after, 200)
		if err != nil || c.HistoryGap != gap || len(c.Events) != 0 || c.EarliestAvailableSequence != h+1 {
			t.Fatalf("after %d: %+v %v", after, c, err)
		}
	}
}

// TestConcurrentAppendsChain: racing appends to one session all land, in one
// unbroken chain.
func TestConcurrentAppendsChain(t *testing.T) {
	l, ctx := openLog(t)
	key := "agent:main:subagent:hot"
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 15 {
				if _, _, err := l.Append(ctx, Event{SessionKey: key, Kind: KindHumanDirectMessage, ActorType: ActorHuman, DedupeKey: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, err := l.Since(ctx, key, 0, 200)
	if err != nil || len(c.Events) != 120 || c.Truncated || c.HistoryGap {
		t.Fatalf("%d events trunc=%v gap=%v err=%v", len(c.Events), c.Truncated, c.HistoryGap, err)
	}
	for i := 1; i < len(c.Events); i++ {
		m, err := l.Stream().GetMsg(ctx, c.Events[i].Sequence)
		if err != nil {
			t.Fatal(err)
		}
		back, _ := parseBack(m.Header.Get(hdrBack))
		if len(back) == 0 || back[0] != c.Events[i-1].Sequence {
			t.Fatalf("event %d names predecessor %v, want %d", c.Events[i].Sequence, back, c.Events[i-1].Sequence)
		}
	}
	if v, _ := l.StateVersion(ctx, key); v != c.Events[119].Sequence {
		t.Fatalf("head %d, want %d", v, c.Events[119].Sequence)
	}
}

func TestClassifyActorAndNotifies(t *testing.T) {
	for _, tc := range []struct {
		prov, src     string
		internal      bool
		wantT, wantID string
	}{
		{"inter_session", "agent:main:main", false, ActorAgent, "agent:main:main"},
		{"internal_system", "", false, ActorSystem, ""},
		{"external_user", "", true, ActorSystem, ""},
		{"external_user", "", false, ActorHuman, ""},
		{"", "", false, ActorHuman, ""},
	} {
		if gt, gid := ClassifyActor(tc.prov, tc.src, tc.internal); gt != tc.wantT || gid != tc.wantID {
			t.Fatalf("%+v: %s %s", tc, gt, gid)
		}
	}
	got := map[string]bool{}
	for _, k := range []string{KindHumanDirectMessage, KindGoalChanged, KindUpstreamMissing, KindChildSpawned, KindRunCompleted, KindRunFailed, KindCompacted, "adopted"} {
		got[k] = Notifies(k)
	}
	want := map[string]bool{KindHumanDirectMessage: true, KindGoalChanged: true, KindUpstreamMissing: true, KindChildSpawned: false, KindRunCompleted: false, KindRunFailed: false, KindCompacted: false, "adopted": false}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("notify flags %v", got)
	}
}

// The version read a caller pipelines (StateVersionRequest, sent on a
// connection of its own, answered by StateVersionReply) says what
// StateVersion says: no head, a head raised by appends, a deleted head.
func TestStateVersionPipelined(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	other, _ := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	l, err := Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	const key = "agent:main:main"
	check := func(step string, want uint64) {
		t.Helper()
		direct, err := l.StateVersion(ctx, key)
		if err != nil || direct != want {
			t.Fatalf("%s: StateVersion = %d, %v; want %d", step, direct, err, want)
		}
		m, err := other.RequestMsgWithContext(ctx, l.StateVersionRequest(key))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.StateVersionReply(ctx, key, m); err != nil || got != want {
			t.Fatalf("%s: pipelined = %d, %v; want %d", step, got, err, want)
		}
	}
	check("no head", 0)
	appendOne(t, ctx, l, key, KindHumanDirectMessage, "a")
	ev := appendOne(t, ctx, l, key, KindHumanDirectMessage, "b")
	check("appended", ev.Sequence)
	if err := l.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	check("deleted", 0)
}
