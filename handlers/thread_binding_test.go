package handlers_test

import (
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
)

// threadStack is a worker and a gateway running the script agent main,
// with one routed session in a Discord thread (its parent).
func threadStack(t *testing.T, edit func(c *config.Config)) (*inboundStack, string) {
	t.Helper()
	is := routedStack(t, "main", func(c *config.Config) {
		c.Agents.Defaults.Subagents.MaxChildrenPerAgent = 20
		if edit != nil {
			edit(c)
		}
	})
	is.gw = gatewaytest.Start(t, is.Stack, is.Conn, "gw-threads", nil, gateway.Options{})
	res := is.mustInbound(is.adapterToken("*"), threadMsg("C1", "T1", "hello parent"))
	parent := res["sessionKey"].(string)
	if parent != "agent:main:discord:channel:c1:thread:t1" || res["status"] != "ok" {
		t.Fatalf("the parent's message: %v", res)
	}
	return is, parent
}

func threadMsg(channelID, thread, text string) string {
	m := map[string]any{"channel": "discord", "from": "u1", "chatType": "channel", "groupId": channelID, "text": text, "wait": true}
	if thread != "" {
		m["threadId"] = thread
	}
	return routedBody(m)
}

// spawnThreadChild spawns a thread-bound child of parent and waits for its
// first run and the parent's run carrying its announce to end, so nothing
// of the spawn is still writing.
func spawnThreadChild(t *testing.T, is *inboundStack, parent string) string {
	t.Helper()
	res := is.MustCall(parent, "sessions_spawn", `{"task":"stay here","thread":true}`)
	if res["status"] != "accepted" || res["mode"] != "session" {
		t.Fatalf("spawn: %v", res)
	}
	child := res["childSessionKey"].(string)
	runstest.WaitRun(t, is.Worker.Deps.Runs, res["runId"].(string), time.Minute)
	var carrier string
	bustest.WaitFor(t, time.Minute, "the announce delivered", func() bool {
		rec, _, err := is.Worker.Deps.Subagents.Get(bustest.Context(t), child)
		if err == nil && rec.Announce != nil && rec.Announce.State == subagents.AnnounceDelivered {
			carrier = rec.Announce.DeliveryRun
		}
		return carrier != ""
	})
	runstest.WaitRun(t, is.Worker.Deps.Runs, carrier, time.Minute)
	return child
}

// deliveryFor waits for the delivery of the reply of runID.
func deliveryFor(t *testing.T, sub *nats.Subscription, runID string) map[string]any {
	t.Helper()
	for {
		_, d := nextDelivery(t, sub)
		if d["runId"] == runID {
			return d
		}
	}
}

// TestThreadBoundChild: a child spawned with thread=true gets the thread
// its requester was talking in: a human's message there runs in the child
// (its transcript) and the child's reply is delivered to that thread; a
// message in another thread, or outside any, still routes by the rules.
// Killing the child ends the binding, and the thread routes by the rules
// again.
func TestThreadBoundChild(t *testing.T) {
	is, parent := threadStack(t, nil)
	tok := is.adapterToken("discord")
	sub := deliverySub(t, is.Conn)
	child := spawnThreadChild(t, is, parent)

	b, _, err := is.Worker.Deps.ThreadBindings.Get(bustest.Context(t), spawns.ConversationOf("discord", "", "C1", "T1"))
	if err != nil || b.TargetSessionKey != child || b.Mode != "session" || b.RequesterSessionKey != parent ||
		b.IdleTimeoutMs != (24*time.Hour).Milliseconds() || b.MaxAgeMs != 0 {
		t.Fatalf("binding %+v (%v)", b, err)
	}

	res := is.mustInbound(tok, threadMsg("C1", "T1", "hello child"))
	if res["sessionKey"] != child || res["status"] != "ok" || res["reply"] != "hi child" || res["created"] != nil {
		t.Fatalf("a message in the bound thread: %v", res)
	}
	tr := is.transcript(child)
	if last := tr[len(tr)-2]; last["role"] != "user" || last["content"] != "hello child" {
		t.Fatalf("the child's transcript ends %v", tr[len(tr)-2:])
	}
	d := deliveryFor(t, sub, res["runId"].(string))
	want := map[string]any{"channel": "discord", "to": "C1", "threadId": "T1", "message": "hi child", "sessionKey": child, "runId": res["runId"]}
	if !maps.Equal(d, want) {
		t.Fatalf("the child's reply was delivered as %v, want %v", d, want)
	}

	for _, m := range []string{threadMsg("C1", "T2", "hello other"), threadMsg("C1", "", "hello channel")} {
		if res := is.mustInbound(tok, m); res["sessionKey"] == child {
			t.Fatalf("a message outside the bound thread went to the child: %v", res)
		}
	}

	kill := is.MustCall(parent, "subagents", `{"action":"kill","target":"`+child+`"}`)
	if kill["status"] != "ok" && kill["status"] != "done" {
		t.Fatalf("kill: %v", kill)
	}
	if res := is.mustInbound(tok, threadMsg("C1", "T1", "hello again")); res["sessionKey"] != parent {
		t.Fatalf("after the kill the thread went to %v, want %s", res["sessionKey"], parent)
	}
	if _, _, err := is.Worker.Deps.ThreadBindings.Get(bustest.Context(t), spawns.ConversationOf("discord", "", "C1", "T1")); err != threadbindings.ErrNotFound {
		t.Fatalf("the binding outlived the kill: %v", err)
	}
}

// TestThreadBindingEndsWithTheChild: deleting or archiving a thread-bound
// child ends its binding, and a binding past its idle time routes nowhere:
// each time the thread's next message goes to the key the rules give.
func TestThreadBindingEndsWithTheChild(t *testing.T) {
	is, parent := threadStack(t, nil)
	tok := is.adapterToken("discord")
	ctx := bustest.Context(t)
	for _, reason := range []string{archives.ReasonDeleted, archives.ReasonArchived} {
		child := spawnThreadChild(t, is, parent)
		if res := is.mustInbound(tok, threadMsg("C1", "T1", "hello child")); res["sessionKey"] != child {
			t.Fatalf("%s: before, the thread went to %v", reason, res["sessionKey"])
		}
		if _, err := is.Worker.Deps.Lifecycle.Delete(ctx, child, reason, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := is.Worker.Deps.ThreadBindings.Get(ctx, spawns.ConversationOf("discord", "", "C1", "T1")); err != threadbindings.ErrNotFound {
			t.Fatalf("%s: the binding outlived the child: %v", reason, err)
		}
		if res := is.mustInbound(tok, threadMsg("C1", "T1", "hello again")); res["sessionKey"] != parent {
			t.Fatalf("%s: after, the thread went to %v, want %s", reason, res["sessionKey"], parent)
		}
	}

	child := spawnThreadChild(t, is, parent)
	binds := is.Worker.Deps.ThreadBindings
	c := spawns.ConversationOf("discord", "", "C1", "T1")
	b, rev, err := binds.Get(ctx, c)
	if err != nil || b.TargetSessionKey != child {
		t.Fatalf("binding %+v (%v)", b, err)
	}
	// idle for longer than idleHours
	old := *b
	old.BoundAt, old.LastActivityAt = b.BoundAt-b.IdleTimeoutMs-1, 0
	if err := binds.Touch(ctx, &old, rev, 0); err != nil {
		t.Fatal(err)
	}
	if res := is.mustInbound(tok, threadMsg("C1", "T1", "hello idle")); res["sessionKey"] != parent {
		t.Fatalf("an expired binding still routed to %v", res["sessionKey"])
	}
	if _, _, err := binds.Get(ctx, c); err != threadbindings.ErrNotFound {
		t.Fatalf("the expired binding is still stored: %v", err)
	}
}

// TestThreadSpawnRefusals: OpenClaw's errors for a thread=true spawn that
// cannot bind, each with nothing written: a channel without threads,
// bindings disabled, spawns disabled, and a conversation bound already.
func TestThreadSpawnRefusals(t *testing.T) {
	off := false
	is, parent := threadStack(t, func(c *config.Config) {
		c.Channels = map[string]config.Channel{"slack": {ThreadBindings: &config.ChannelThreadBindings{ThreadBindings: config.ThreadBindings{Enabled: &off}}}}
		c.Session.ThreadBindings.SpawnSessions = &off
		// discord's sub-agent flag wins over the session's spawnSessions
		c.Channels["discord"] = config.Channel{ThreadBindings: &config.ChannelThreadBindings{SpawnSubagentSessions: new(true)}}
		c.Channels["whatsapp"] = config.Channel{ThreadBindings: &config.ChannelThreadBindings{SpawnSubagentSessions: new(true)}}
	})
	tok := is.adapterToken("*")
	wa := is.mustInbound(tok, routedBody(map[string]any{"channel": "whatsapp", "from": "+15550001", "text": "hello wa", "wait": true}))["sessionKey"].(string)
	sl := is.mustInbound(tok, routedBody(map[string]any{"channel": "slack", "from": "u1", "groupId": "G1", "threadId": "1.5", "text": "hello sl", "wait": true}))["sessionKey"].(string)
	ms := is.mustInbound(tok, routedBody(map[string]any{"channel": "matrix", "from": "u1", "groupId": "!r", "threadId": "$e", "text": "hello mx", "wait": true}))["sessionKey"].(string)
	cases := []struct{ key, err string }{
		{wa, "Thread bindings are unavailable for whatsapp."},
		{sl, "Thread bindings are disabled for slack (set channels.slack.threadBindings.enabled=true to override for this account, or session.threadBindings.enabled=true globally)."},
		{ms, "Thread-bound session spawns are disabled for matrix (set channels.matrix.threadBindings.spawnSessions=true to enable)."},
	}
	for _, c := range cases {
		before := spawnWrites(is)
		res := is.MustCall(c.key, "sessions_spawn", `{"task":"x","thread":true}`)
		if res["status"] != "error" || res["error"] != c.err {
			t.Errorf("%s: %v, want error %q", c.key, res, c.err)
		}
		if after := spawnWrites(is); !maps.Equal(before, after) {
			t.Errorf("%s: the refused spawn wrote: %v -> %v", c.key, before, after)
		}
	}

	child := spawnThreadChild(t, is, parent)
	before := spawnWrites(is)
	res := is.MustCall(parent, "sessions_spawn", `{"task":"another","thread":true}`)
	if res["status"] != "error" || res["error"] != "This discord conversation is already bound to another session. Unbind it first before spawning a new thread-bound subagent." {
		t.Fatalf("second binding of one thread: %v", res)
	}
	if after := spawnWrites(is); !maps.Equal(before, after) {
		t.Errorf("the refused spawn wrote: %v -> %v", before, after)
	}
	if res := is.mustInbound(tok, threadMsg("C1", "T1", "hello still")); res["sessionKey"] != child {
		t.Fatalf("the thread left its first child: %v", res)
	}
}

// spawnWrites is the last sequence of the streams and buckets a spawn
// writes (the turns' own writes, such as lanes and deliveries, go on
// around it).
func spawnWrites(is *inboundStack) map[string]uint64 {
	is.T.Helper()
	out := map[string]uint64{}
	for name, seq := range is.writes() {
		switch name {
		case "KV_threadbindings", "KV_subagents", "SB_TRANSCRIPTS":
			out[name] = seq
		}
	}
	if len(out) != 3 {
		is.T.Fatalf("streams: %v", out)
	}
	return out
}

// A spawn reads its requester's session from the bucket when the worker's
// index does not have it yet (a session an inbound message made a moment
// before, on another worker): its route is found, and the refusal is the
// channel's, not "requires an active channel conversation context".
func TestSpawnReadsARequesterTheIndexLacks(t *testing.T) {
	off := false
	s := spawnStack(t, func(c *config.Config) {
		c.Channels = map[string]config.Channel{"slack": {ThreadBindings: &config.ChannelThreadBindings{ThreadBindings: config.ThreadBindings{Enabled: &off}}}}
	})
	s.Worker.Deps.Index.Stop() // it keeps what it holds and takes nothing more
	key := "agent:main:slack:group:g1:thread:1.5"
	now := time.Now().UnixMilli()
	if _, err := s.Worker.Deps.Store.Create(bustest.Context(t), &sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now, ChatType: "group",
		LastChannel: "slack", LastTo: "G1", DeliveryContext: &sessions.DeliveryContext{Channel: "slack", To: "G1", ThreadID: "1.5"}}); err != nil {
		t.Fatal(err)
	}
	if s.Worker.Deps.Index.Get(key) != nil {
		t.Fatal("the stopped index took the new session; the test needs an index without it")
	}
	res := s.MustCall(key, "sessions_spawn", `{"task":"x","thread":true}`)
	want := "Thread bindings are disabled for slack (set channels.slack.threadBindings.enabled=true to override for this account, or session.threadBindings.enabled=true globally)."
	if res["status"] != "error" || res["error"] != want {
		t.Fatalf("spawn from a session only the bucket has: %v, want error %q", res, want)
	}
}
