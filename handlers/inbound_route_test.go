package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// routedStack is a worker (and, with a gateway, the script agent main)
// whose run quotas do not limit the thousand turns a test queues.
func routedStack(t *testing.T, dmScope string, edit func(c *config.Config)) *inboundStack {
	t.Helper()
	is := &inboundStack{}
	is.Stack = handlerstest.Start(t, func(c *config.Config) {
		c.Session.DMScope = dmScope
		c.Quotas.RunsPerSession.Rate, c.Quotas.RunsPerAgent.Rate = 0, 0
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^hello (.*)", "reply": "hi {{1}}"},
		}}}}
		if edit != nil {
			edit(c)
		}
	})
	return is
}

func routedBody(m map[string]any) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// TestInboundRoutedThousandMessages: 1,000 routed direct messages from 100
// peers on three channels (two accounts), sent through NATS under each
// dmScope, land in exactly the sessions the reference's key table gives;
// each session is created once (by the first message for it) with its
// origin and route, and nothing else is in the bucket.
func TestInboundRoutedThousandMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	channels := []string{"telegram", "slack", "googlechat"}
	for _, scope := range []string{"main", "per-peer", "per-channel-peer", "per-account-channel-peer"} {
		t.Run(scope, func(t *testing.T) {
			is := routedStack(t, scope, nil)
			tok := is.adapterToken("*")
			type result struct {
				i         int
				key, want string
				created   bool
			}
			results := make([]result, 1000)
			var wg sync.WaitGroup
			work := make(chan int)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						ch, acct := channels[i%3], []string{"", "Work"}[(i/300)%2]
						peer := fmt.Sprintf("Peer/%02d+X", i%100)
						m := map[string]any{"channel": ch, "from": peer, "text": fmt.Sprintf("msg %d", i)}
						if acct != "" {
							m["accountId"] = acct
						}
						res, err := is.inbound(tok, routedBody(m))
						if err != nil {
							t.Errorf("message %d: %v", i, err)
							continue
						}
						p := strings.ToLower(peer)
						want := map[string]string{
							"main":                     "agent:main:main",
							"per-peer":                 "agent:main:direct:" + p,
							"per-channel-peer":         "agent:main:" + ch + ":direct:" + p,
							"per-account-channel-peer": "agent:main:" + ch + ":" + map[string]string{"": "default", "Work": "work"}[acct] + ":direct:" + p,
						}[scope]
						key, _ := res["sessionKey"].(string)
						results[i] = result{i: i, key: key, want: want, created: res["created"] == true}
					}
				}()
			}
			for i := range 1000 {
				work <- i
			}
			close(work)
			wg.Wait()
			createdBy := map[string]int{}
			for _, r := range results {
				if r.key != r.want {
					t.Fatalf("message %d went to %q, want %q", r.i, r.key, r.want)
				}
				if r.created {
					createdBy[r.key]++
				}
			}
			distinct := map[string]bool{}
			for _, r := range results {
				distinct[r.want] = true
				if createdBy[r.want] != 1 {
					t.Fatalf("session %s: created by %d messages, want 1", r.want, createdBy[r.want])
				}
			}
			keys := bucketKeys(t, is)
			if !maps.Equal(keys, distinct) {
				t.Fatalf("bucket holds %d sessions, want the %d routed ones", len(keys), len(distinct))
			}
			e, _, err := is.Worker.Deps.Store.Get(bustest.Context(t), results[999].want)
			if err != nil {
				t.Fatal(err)
			}
			if e.AgentID != "main" || e.SessionID == "" || e.ChatType != "direct" || e.Origin == nil || e.Origin.ChatType != "direct" ||
				e.DeliveryContext == nil || e.DeliveryContext.Channel == "" || e.DeliveryContext.To == "" {
				t.Fatalf("routed session entry: %+v origin %+v dc %+v", e, e.Origin, e.DeliveryContext)
			}
		})
	}
}

func bucketKeys(t *testing.T, is *inboundStack) map[string]bool {
	t.Helper()
	lister, err := is.Worker.Deps.Store.KV().ListKeys(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for k := range lister.Keys() {
		dec, err := bus.DecodeKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out[dec] = true
	}
	return out
}

// TestInboundRoutedFirstMessageTwoWorkers: the same first message (one
// idempotency key) handled at once by two workers creates its session once
// and queues one run: one answer says created, the other repeat.
func TestInboundRoutedFirstMessageTwoWorkers(t *testing.T) {
	is := routedStack(t, "per-channel-peer", nil)
	nc2, _ := bustest.Connect(t, is.Server)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w2, err := handlers.StartWorker(ctx, nc2, is.Config, bus.NewVerifier(is.Operator.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w2.Stop)
	workers := []bus.Handler{is.Worker.Deps.Inbound(), w2.Deps.Inbound()}
	for peer := range 20 {
		body := routedBody(map[string]any{"channel": "telegram", "from": fmt.Sprint(5000 + peer), "text": "hello", "idempotencyKey": fmt.Sprint("tg-", peer)})
		answers := make([]map[string]any, 2)
		var wg sync.WaitGroup
		for i, h := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := h.Handle(ctx, &bus.Request{Caller: bus.Caller{Adapter: "telegram"}, Body: []byte(body)})
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				b, _ := json.Marshal(out)
				_ = json.Unmarshal(b, &answers[i])
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		key := fmt.Sprint("agent:main:telegram:direct:", 5000+peer)
		created, repeats := 0, 0
		for _, a := range answers {
			if a["sessionKey"] != key || a["runId"] != answers[0]["runId"] {
				t.Fatalf("answers disagree: %v", answers)
			}
			if a["created"] == true {
				created++
			}
			if a["repeat"] == true {
				repeats++
			}
		}
		if created != 1 || repeats != 1 {
			t.Fatalf("peer %d: %d answers created the session and %d were repeats, want 1 and 1: %v", peer, created, repeats, answers)
		}
	}
	if n := len(bucketKeys(t, is)); n != 20 {
		t.Fatalf("%d sessions, want 20", n)
	}
}

// TestInboundRoutedTurn: a routed first message runs like any other (reply
// delivered to the sender), identityLinks merge one person's DMs from two
// channels into one session, and a group message is answered in the group.
func TestInboundRoutedTurn(t *testing.T) {
	is := routedStack(t, "per-peer", func(c *config.Config) {
		c.Session.IdentityLinks = map[string][]string{"alice": {"telegram:111", "discord:222"}}
		c.Tools.Sessions.Visibility = "all"
	})
	is.gw = gatewaytest.Start(t, is.Stack, is.Conn, "gw-routed", nil, gateway.Options{})
	sub := deliverySub(t, is.Conn)
	tok := is.adapterToken("*")

	res := is.mustInbound(tok, `{"channel":"telegram","from":"111","accountId":"bot1","text":"hello there","wait":true}`)
	if res["status"] != "ok" || res["reply"] != "hi there" || res["sessionKey"] != "agent:main:direct:alice" || res["created"] != true {
		t.Fatalf("routed turn: %v", res)
	}
	subj, d := nextDelivery(t, sub)
	if subj != "sb.deliver.telegram" || d["to"] != "111" || d["accountId"] != "bot1" || d["message"] != "hi there" {
		t.Fatalf("delivery on %s: %v", subj, d)
	}
	e, _, err := is.Worker.Deps.Store.Get(bustest.Context(t), "agent:main:direct:alice")
	if err != nil {
		t.Fatal(err)
	}
	wantOrigin := sessions.Origin{Provider: "telegram", AccountID: "bot1", ChatType: "direct", From: "111", To: "111"}
	if e.Origin == nil || *e.Origin != wantOrigin || e.Channel != "telegram" || e.LastTo != "111" {
		t.Fatalf("entry origin %+v, channel %q, lastTo %q", e.Origin, e.Channel, e.LastTo)
	}

	res = is.mustInbound(tok, `{"channel":"discord","from":"222","text":"hello again","wait":true}`)
	if res["sessionKey"] != "agent:main:direct:alice" || res["created"] != nil || res["reply"] != "hi again" {
		t.Fatalf("linked peer: %v", res)
	}
	if _, d = nextDelivery(t, sub); d["to"] != "222" || d["channel"] != "discord" {
		t.Fatalf("linked peer's reply went to %v", d)
	}

	res = is.mustInbound(tok, `{"channel":"googlechat","from":"users/9","groupId":"spaces/AAAAq1","threadId":"spaces/AAAAq1/threads/T1","text":"hello space","wait":true}`)
	const gkey = "agent:main:googlechat:group:spaces/aaaaq1:thread:spaces/aaaaq1/threads/t1"
	if res["sessionKey"] != gkey || res["created"] != true || res["reply"] != "hi space" {
		t.Fatalf("group turn: %v", res)
	}
	if subj, d = nextDelivery(t, sub); subj != "sb.deliver.googlechat" || d["to"] != "spaces/AAAAq1" || d["threadId"] != "spaces/AAAAq1/threads/T1" {
		t.Fatalf("group reply on %s: %v", subj, d)
	}
	if tr := is.transcript(gkey); len(tr) != 2 {
		t.Fatalf("group transcript: %v", tr)
	}
	// the list reads the worker's index, which follows the bucket's watch
	var rows map[string]any
	bustest.WaitFor(t, 20*time.Second, "both routed sessions listed", func() bool {
		rows = is.MustCall("agent:main:main", "sessions_list", `{}`)
		return fmt.Sprint(rows["count"]) == "2"
	})
}

// TestInboundRoutedRefusals: a routed message that cannot be routed says
// why (400) and writes nothing.
func TestInboundRoutedRefusals(t *testing.T) {
	is := routedStack(t, "per-peer", nil)
	tok := is.adapterToken("*")
	cases := []struct {
		name, body, msg string
	}{
		{"missing sender", `{"channel":"telegram","text":"hi"}`, "from required"},
		{"missing channel", `{"from":"1","text":"hi"}`, "channel required"},
		{"unknown chatType", `{"channel":"telegram","from":"1","chatType":"room","groupId":"g","text":"hi"}`, `chatType "room" is unknown: use direct, group or channel`},
		{"group without id", `{"channel":"telegram","from":"1","chatType":"group","text":"hi"}`, "groupId required"},
		{"thread on whatsapp", `{"channel":"whatsapp","from":"1","threadId":"9","text":"hi"}`, "channel whatsapp has no threads"},
		{"over-long peer", `{"channel":"telegram","from":"` + strings.Repeat("x", 250) + `","text":"hi"}`, "the session key this message routes to is 268 bytes, over the 256"},
		{"peer with a space", `{"channel":"telegram","from":"a b","text":"hi"}`, "cannot be part of a session key"},
		{"unknown agent", `{"channel":"telegram","from":"1","agentId":"ghost","text":"hi"}`, `agentId "ghost" is not in agents.list`},
		{"chatType not a string", `{"channel":"telegram","from":"1","chatType":1,"text":"hi"}`, "chatType must be a string"},
	}
	before := is.writes()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := is.inbound(tok, c.body)
			e, isErr := bus.AsError(err)
			if !isErr || e.Code != 400 || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v, want 400 with %q", err, c.msg)
			}
			if after := is.writes(); !maps.Equal(after, before) {
				t.Fatalf("a refused message wrote: streams were %v, now %v", before, after)
			}
		})
	}
}
