package handlers

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// Rows whose strings need no escaping are written with plain copies
// (derivedFields.plain); a page mixing them with rows that need escaping in each
// field the shortcut covers must still be json.Marshal's bytes, and the
// pooled reply must stay intact until it is released.
func TestListReplyPlainRowsAreJSONMarshal(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	cfg := config.Default()
	cfg.Tools.Sessions.Visibility = "agent"
	ctx := bustest.Context(t)
	w, err := StartWorker(ctx, nc, cfg, bus.NewVerifier("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const parent = "agent:main:subagent:<a&b>"
	now := time.Now().UnixMilli()
	es := []*sessions.Entry{
		{Key: "agent:main:main", SessionID: "11111111-1111-4111-8111-111111111111", Label: "plain", DisplayName: "Plain user", Model: "gpt-5.2"},
		{Key: parent, SpawnedBy: "agent:main:main", Label: `say "hi"`},
		{Key: "agent:main:telegram:direct:u1", DisplayName: "héllo <b>", Group: "g\u2028", ChatType: "direct"},
		{Key: "agent:main:subagent:c", ParentSessionKey: parent, Status: `done\`, Model: "m&m"},
		{Key: "agent:main:subagent:d", SpawnedBy: "agent:main:main", SessionID: "tab\tid"},
		{Key: "agent:main:discord:group:dev", Label: "dev", ChatType: "group", Model: "gpt-5.2", Status: "done"},
		{Key: "agent:main:slack:direct:u2", DisplayName: "ctl\x01", AgentID: "main"},
		{Key: "agent:main:slack:direct:u3", Label: "x>y"},
	}
	for i, e := range es {
		e.UpdatedAt = now - int64(i)*1000
		if _, err := w.Deps.Store.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Deps.Index.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	d := w.Deps
	r, err := d.newRequester(bus.Caller{SessionKey: "agent:main:main"})
	if err != nil {
		t.Fatal(err)
	}
	plain := 0
	for _, e := range es {
		if r.derived(d.Index.Get(e.Key)).Plain {
			plain++
		}
	}
	if plain != 2 { // the main session and the discord group
		t.Fatalf("%d entries plain, want 2", plain)
	}
	p, err := rules.ParseParams([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var replies [][]byte
	for range 3 { // a released scratch is reused: each reply stands alone
		res, err := sessionsList(ctx, d, r, p)
		if err != nil {
			t.Fatal(err)
		}
		lent, ok := res.(*bus.Lent)
		if !ok {
			t.Fatalf("sessions_list result is %T, want *bus.Lent", res)
		}
		var got listResult
		if err := json.Unmarshal(lent.Data, &got); err != nil {
			t.Fatalf("reply is not JSON: %v: %s", err, lent.Data)
		}
		if got.Count != len(es) {
			t.Fatalf("count %d, want %d: %s", got.Count, len(es), lent.Data)
		}
		want, err := json.Marshal(&got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lent.Data, want) {
			t.Fatalf("reply differs from json.Marshal:\n got %s\nwant %s", lent.Data, want)
		}
		replies = append(replies, bytes.Clone(lent.Data))
		lent.Release()
	}
	for _, b := range replies[1:] {
		if !bytes.Equal(b, replies[0]) {
			t.Fatalf("replies differ between calls:\n%s\n%s", b, replies[0])
		}
	}
}
