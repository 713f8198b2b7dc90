package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/events"
)

// liveRun collects one run's live output until its end (done or error).
func liveRun(t *testing.T, sub *nats.Subscription, runID string) []bus.LiveEvent {
	t.Helper()
	var out []bus.LiveEvent
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("live output of %s after %d messages: %v", runID, len(out), err)
		}
		var ev bus.LiveEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("live message %s: %v", m.Data, err)
		}
		if ev.RunID != runID {
			continue
		}
		out = append(out, ev)
		if ev.Type == bus.LiveDone || ev.Type == bus.LiveError {
			return out
		}
	}
}

func TestLiveOutputOfATurn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := events.Open(ctx, e.js, e.names); err != nil {
		t.Fatal(err)
	}
	session := "agent:main:main"
	sub, err := e.nc.SubscribeSync(e.names.Live(bus.EncodeKey(session)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	e.gateway("gw1", Options{})

	// the echo: a reply of several words comes as several text deltas
	req := e.request(session, "main", "streamed words, one by one")
	e.submit(req)
	got := liveRun(t, sub, req.RunID)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("record %+v", rec)
	}
	var text strings.Builder
	deltas := 0
	for i, ev := range got {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d: %+v", i, ev.Seq, got)
		}
		if ev.Type == bus.LiveText {
			text.WriteString(ev.Delta)
			deltas++
		}
	}
	last := got[len(got)-1]
	if deltas != 5 || last.Type != bus.LiveDone || last.Reply == nil || *last.Reply != text.String() || text.String() != req.Message {
		t.Fatalf("%d deltas %q, end %+v", deltas, text.String(), last)
	}
	// the transcript is as it always was
	if msgs := e.transcript(session); len(msgs) != 2 || msgs[1]["content"] != req.Message {
		t.Fatalf("transcript %v", msgs)
	}

	// tool activity: the call with its arguments, whether it worked, no
	// result body; here no worker answers the tool, so it did not
	req = e.request(session, "main", "tool time")
	e.submit(req)
	got = liveRun(t, sub, req.RunID)
	var kinds []string
	for _, ev := range got {
		kinds = append(kinds, ev.Type)
	}
	if strings.Join(kinds, ",") != "tool_call,tool_result,text,text,done" || string(got[0].Arguments) != `{"limit":1}` ||
		got[1].Tool != "sessions_list" || got[1].OK == nil || *got[1].OK {
		t.Fatalf("live output %+v", got)
	}

	// a failed turn ends with its error
	req = e.request(session, "main", "fail now")
	e.submit(req)
	got = liveRun(t, sub, req.RunID)
	if len(got) != 1 || got[0].Type != bus.LiveError || got[0].Error != "scripted failure" || got[0].Seq != 1 {
		t.Fatalf("live output %+v", got)
	}

	// nothing stores the live output
	if name, err := e.js.StreamNameBySubject(ctx, e.names.Live(bus.EncodeKey(session))); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %q captures the live subject (%v)", name, err)
	}
}
