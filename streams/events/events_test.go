package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestEveryFollowerReceivesEachEventOnce(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	names := bus.NewNames("sb")
	st, err := Open(bustest.Context(t), js, names)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[int][]string{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		if err := st.Follow(ctx, slog.New(slog.DiscardHandler), func(ev *Event) {
			mu.Lock()
			got[i] = append(got[i], ev.ID+"@"+ev.SessionKey)
			mu.Unlock()
		}, KindAnnounce); err != nil {
			t.Fatal(err)
		}
	}
	pctx := bustest.Context(t)
	body := json.RawMessage(`{"x":1}`)
	for _, ev := range []*Event{
		{Kind: KindAnnounce, ID: "announce:r1", SessionKey: "agent:main:main", Body: body},
		{Kind: KindAnnounce, ID: "announce:r1", SessionKey: "agent:main:main", Body: body}, // a repeat: deduped
		{Kind: KindNotice, ID: "notice:n1", SessionKey: "agent:main:main", Body: body},     // filtered out
		{Kind: KindAnnounce, ID: "announce:r2", SessionKey: "agent:main:subagent:x.y", Body: body},
	} {
		if err := st.Publish(pctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"announce:r1@agent:main:main", "announce:r2@agent:main:subagent:x.y"}
	bustest.WaitFor(t, 10*time.Second, "both followers got both announces", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[0]) >= 2 && len(got[1]) >= 2
	})
	info, err := js.Stream(pctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("stream holds %d events, want 3 (the repeat deduped)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 2 {
		if len(got[i]) != 2 || got[i][0] != want[0] || got[i][1] != want[1] {
			t.Fatalf("follower %d got %v, want %v", i, got[i], want)
		}
	}
	// the subject is the receiving session's, encoded
	m, err := info.GetLastMsgForSubject(pctx, names.SessionEvent(bus.EncodeKey("agent:main:subagent:x.y"), KindAnnounce))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Msg-Id") != "announce:r2" {
		t.Fatalf("msg id %q", m.Header.Get("Nats-Msg-Id"))
	}
}
