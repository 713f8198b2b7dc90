package handlers_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
)

// TestInboundRoutedIDsCannotNameAnotherSession: an adapter that passes a
// platform's group, sender or thread id as sent cannot, with a ":" in it,
// route a message into another conversation's session. Each victim session
// is first created by its own message; each attack, sent through NATS as an
// adapter would, would have routed into one of them. It is refused (400)
// and writes nothing, and a Matrix room id, whose ":" is its own, still
// routes to a session of its own.
func TestInboundRoutedIDsCannotNameAnotherSession(t *testing.T) {
	is := routedStack(t, "per-account-channel-peer", nil)
	tok := is.adapterToken("*")
	victims := []struct{ body, key string }{
		{`{"channel":"discord","from":"u1","chatType":"channel","groupId":"gx","threadId":"t1","text":"hi"}`, "agent:main:discord:channel:gx:thread:t1"},
		{`{"channel":"telegram","from":"u1","groupId":"-100","threadId":"5","text":"hi"}`, "agent:main:telegram:group:-100:topic:5"},
		{`{"channel":"slack","from":"p","accountId":"group","text":"hi"}`, "agent:main:slack:group:direct:p"},
		{`{"channel":"slack","from":"p","threadId":"t","text":"hi"}`, "agent:main:slack:default:direct:p:thread:t"},
	}
	for _, v := range victims {
		if res := is.mustInbound(tok, v.body); res["sessionKey"] != v.key || res["created"] != true {
			t.Fatalf("victim %s: %v", v.key, res)
		}
	}
	attacks := []struct{ name, body, msg string }{
		{"a group id holding a thread", `{"channel":"discord","from":"evil","chatType":"channel","groupId":"gx:thread:t1","text":"pwn"}`,
			`groupId "gx:thread:t1" cannot be part of a session key: it has a "thread" part between colons`},
		{"the same, upper-cased", `{"channel":"discord","from":"evil","chatType":"channel","groupId":"GX:Thread:T1","text":"pwn"}`,
			`groupId "GX:Thread:T1" cannot be part of a session key: it has a "thread" part`},
		{"a Telegram group id holding a topic", `{"channel":"telegram","from":"evil","groupId":"-100:topic:5","text":"pwn"}`,
			`groupId "-100:topic:5" cannot be part of a session key: it has a "topic" part`},
		{"a group id reading as a DM under an account named group", `{"channel":"slack","from":"evil","groupId":"direct:p","text":"pwn"}`,
			`groupId "direct:p" cannot be part of a session key: it has a "direct" part`},
		{"a sender id holding a thread", `{"channel":"slack","from":"p:thread:t","text":"pwn"}`,
			`from "p:thread:t" cannot be part of a session key: it has a "thread" part`},
		{"a thread id holding a thread", `{"channel":"discord","from":"evil","chatType":"channel","groupId":"gx","threadId":"x:thread:t1","text":"pwn"}`,
			`threadId "x:thread:t1" cannot be part of a session key: it has a "thread" part`},
		{"a group id with a leading colon", `{"channel":"discord","from":"evil","chatType":"channel","groupId":":gx","text":"pwn"}`,
			`groupId ":gx" cannot be part of a session key: it starts or ends with ":"`},
	}
	before := is.writes()
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			res, err := is.inbound(tok, a.body)
			e, isErr := bus.AsError(err)
			if !isErr || e.Code != 400 || !strings.Contains(e.Message, a.msg) {
				t.Fatalf("got %v (reply %v), want 400 with %q", err, res, a.msg)
			}
			if after := is.writes(); !maps.Equal(after, before) {
				t.Fatalf("a refused message wrote: streams were %v, now %v", before, after)
			}
		})
	}
	const room = "agent:main:matrix:channel:!RoomA:example.org"
	if res := is.mustInbound(tok, `{"channel":"matrix","from":"@u:hs","chatType":"channel","groupId":"!RoomA:example.org","text":"hi"}`); res["sessionKey"] != room || res["created"] != true {
		t.Fatalf("a Matrix room id: %v", res)
	}
	want := map[string]bool{room: true}
	for _, v := range victims {
		want[v.key] = true
	}
	if got := bucketKeys(t, is); !maps.Equal(got, want) {
		t.Fatalf("sessions %v, want %v", got, want)
	}
}
