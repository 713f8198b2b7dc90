package handlers_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestStopWithNoRunningTurn: /stop in a chat whose session runs nothing is
// answered OpenClaw's text, and writes nothing but that answer's delivery;
// the ops subject answers "idle" the same way.
func TestStopWithNoRunningTurn(t *testing.T) {
	is := startInbound(t)
	tok := is.adapterToken("telegram")
	if out := is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"telegram","from":"42","text":"hello there"}`); out["status"] == "" {
		t.Fatalf("turn: %v", out)
	}
	// the turn above has ended: its reply closes the transcript
	waitTranscript(t, is, humanKey, 2)
	before := is.writes()
	delete(before, is.Worker.Deps.Names.DeliverStream())
	out := is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"telegram","from":"42","text":"  /STOP "}`)
	if out["status"] != "ok" || out["reply"] != handlers.StopReplyText {
		t.Fatalf("/stop: %v", out)
	}
	body := []byte(`{"sessionKey":"` + humanKey + `"}`)
	reply, err := bus.SessionOp(context.Background(), is.Conn, is.Worker.Deps.Names, "stop", is.Token(bus.Caller{Adapter: bus.AnyChannel}), body)
	if err != nil || string(reply) != `{"status":"idle","sessionKey":"`+humanKey+`","text":"`+handlers.StopReplyText+`"}` {
		t.Fatalf("ops stop: %s %v", reply, err)
	}
	after := is.writes()
	delete(after, is.Worker.Deps.Names.DeliverStream())
	if !maps.Equal(before, after) {
		t.Fatalf("a stop with no running turn wrote: before %v after %v", before, after)
	}
}

// TestStopRefusesAnotherChannelsAdapter: an adapter token for one channel
// cannot stop a session of another channel through the ops subject, nor
// an unknown session.
func TestStopRefusesAnotherChannelsAdapter(t *testing.T) {
	is := startInbound(t)
	now := time.Now().UnixMilli()
	key := "agent:main:discord:dm:7"
	is.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now, LastChannel: "discord"})
	_, err := bus.SessionOp(context.Background(), is.Conn, is.Worker.Deps.Names, "stop", is.adapterToken("telegram"), []byte(`{"sessionKey":"`+key+`"}`))
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeForbidden {
		t.Fatalf("telegram adapter stopping a discord session: %v", err)
	}
	_, err = bus.SessionOp(context.Background(), is.Conn, is.Worker.Deps.Names, "stop", is.Token(bus.Caller{Adapter: bus.AnyChannel}), []byte(`{"sessionKey":"agent:main:nope"}`))
	if !errors.As(err, &be) || be.Code != bus.CodeNotFound {
		t.Fatalf("unknown session: %v", err)
	}
}

func waitTranscript(t *testing.T, is *inboundStack, key string, n int) {
	t.Helper()
	bustest.WaitFor(t, 30*time.Second, "the turn's reply in the transcript", func() bool { return len(is.transcript(key)) >= n })
}
