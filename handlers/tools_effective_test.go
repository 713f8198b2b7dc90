package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts/transcriptstest"
)

const toolsGroupKey = "agent:main:telegram:group:-100"

// startToolLists: a worker whose policy removes tools at three stages,
// and a telegram group session routed to group -100.
func startToolLists(t *testing.T) *handlerstest.Stack {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Deny = []string{"agents_list"}
		c.Channels = map[string]config.Channel{"telegram": {Groups: map[string]config.ChannelGroup{
			"-100": {
				Tools:         &config.ToolList{Deny: []string{"sessions_spawn"}},
				ToolsBySender: map[string]config.ToolList{"id:user42": {Deny: []string{"sessions_send"}}},
			},
		}}}
	})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: toolsGroupKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		ChatType: "group", DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: "-100"}})
	return s
}

func inboundRaw(t *testing.T, s *handlerstest.Stack, token string, body map[string]any) (map[string]any, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := bus.Inbound(ctx, s.Conn, s.Worker.Deps.Names, token, b)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("reply %s: %v", data, err)
	}
	return out, nil
}

// TestInboundTools: `/tools` in a human message answers with the
// session's effective tool list, matched against its sender, published to
// the message's route like /goal's answer; it queues no run and writes no
// transcript. "/tools please" is an ordinary turn.
func TestInboundTools(t *testing.T) {
	s := startToolLists(t)
	tg := s.Token(bus.Caller{Adapter: "telegram"})
	sub := deliverySub(t, s.Conn)
	msg := func(from, text string) map[string]any {
		return map[string]any{"sessionKey": toolsGroupKey, "channel": "telegram", "from": from, "to": "-100", "text": text}
	}
	for _, tc := range []struct {
		from      string
		has, hasn []string
	}{
		{"user42", []string{
			"Tools of " + toolsGroupKey + ": 6 of 9 allowed",
			"sessions_search: removed by the profile stage (tools.alsoAllow)",
			"agents_list: removed by the global stage (tools.deny)",
			"sessions_send: removed by the group stage (channels.telegram.groups[-100].toolsBySender[id:user42].deny)",
		}, []string{"sessions_spawn: removed"}},
		{"user99", []string{
			"sessions_spawn: removed by the group stage (channels.telegram.groups[-100].tools.deny)",
		}, []string{"sessions_send: removed"}},
	} {
		res, err := inboundRaw(t, s, tg, msg(tc.from, "  /tools "))
		if err != nil || res["status"] != "ok" {
			t.Fatalf("/tools from %s: %v %v", tc.from, res, err)
		}
		reply, _ := res["reply"].(string)
		for _, want := range tc.has {
			if !strings.Contains(reply, want) {
				t.Errorf("/tools from %s: reply lacks %q:\n%s", tc.from, want, reply)
			}
		}
		for _, not := range tc.hasn {
			if strings.Contains(reply, not) {
				t.Errorf("/tools from %s: reply has %q:\n%s", tc.from, not, reply)
			}
		}
		subj, d := nextDelivery(t, sub)
		if subj != "sb.deliver.telegram" || d["message"] != reply || d["to"] != "-100" || d["sessionKey"] != toolsGroupKey {
			t.Fatalf("/tools delivered on %s: %v", subj, d)
		}
	}
	if tr := transcriptstest.Transcript[map[string]any](t, s.Worker.Deps.Transcripts, toolsGroupKey, 100); len(tr) != 0 {
		t.Fatalf("/tools wrote the transcript: %v", tr)
	}
	res, err := inboundRaw(t, s, tg, msg("user42", "/tools please"))
	if err != nil || res["status"] != "accepted" {
		t.Fatalf("/tools please is an ordinary turn: %v %v", res, err)
	}
	if _, err := inboundRaw(t, s, tg, map[string]any{"sessionKey": "agent:main:nobody", "channel": "telegram", "from": "u", "text": "/tools"}); code(err) != bus.CodeNotFound {
		t.Fatalf("/tools on an unknown session: %v, want 404", err)
	}
}

// TestSessionToolsOp: sb.ops.session.tools lists every tool this build
// serves with its verdict, stage and key, as the worker checks calls;
// unknown sessions and other channels' adapters are refused.
func TestSessionToolsOp(t *testing.T) {
	s := startToolLists(t)
	op := func(c bus.Caller, key string) (map[string]any, error) {
		body, _ := json.Marshal(map[string]string{"sessionKey": key})
		reply, err := bus.SessionOp(bustest.Context(t), s.Conn, bus.NewNames(""), "tools", s.Token(c), body)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(reply, &out); err != nil {
			t.Fatalf("reply %s: %v", reply, err)
		}
		return out, nil
	}
	ops := bus.Caller{Adapter: bus.AnyChannel}
	res, err := op(ops, toolsGroupKey)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range res["tools"].([]any) {
		m := v.(map[string]any)
		got[m["tool"].(string)] = "allowed"
		if m["allowed"] != true {
			got[m["tool"].(string)] = m["stage"].(string) + " " + m["key"].(string)
		}
	}
	want := map[string]string{}
	for _, n := range schema.Names() {
		want[n] = "allowed"
	}
	want["agents_list"] = "global tools.deny"
	want["sessions_spawn"] = "group channels.telegram.groups[-100].tools.deny"
	want["sessions_search"] = "profile tools.alsoAllow" // opt-in, not named
	if len(got) != len(want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if !strings.Contains(res["text"].(string), "6 of 9 allowed") {
		t.Errorf("text: %s", res["text"])
	}
	// what it says is what the worker does
	if _, err := s.Call(toolsGroupKey, "sessions_spawn", `{"task":"x"}`); code(err) != bus.CodeForbidden {
		t.Errorf("sessions_spawn from the group session: %v, want 403", err)
	}
	if _, err := op(ops, "agent:main:nobody"); code(err) != bus.CodeNotFound {
		t.Errorf("unknown session: %v, want 404", err)
	}
	if _, err := op(bus.Caller{Adapter: "slack"}, toolsGroupKey); code(err) != bus.CodeForbidden {
		t.Errorf("another channel's adapter: %v, want 403", err)
	}
}

// TestGroupToolsBySenderInRuns: a run answering a group member's message
// carries its sender in the run token, so the worker applies the group's
// toolsBySender entry for that sender to the run's tool calls, and other
// members' runs are not affected.
func TestGroupToolsBySenderInRuns(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^list$", "tool": map[string]any{"name": "sessions_list"}, "reply": "got: {{result}}"},
		}}}}
		c.Channels = map[string]config.Channel{"telegram": {Groups: map[string]config.ChannelGroup{
			"-100": {ToolsBySender: map[string]config.ToolList{"id:42": {Deny: []string{"sessions_list"}}}},
		}}}
	})
	gatewaytest.Start(t, s, s.Conn, "gw-sender", nil, gateway.Options{})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: toolsGroupKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		ChatType: "group", DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: "-100"}})
	tg := s.Token(bus.Caller{Adapter: "telegram"})
	turn := func(from string) string {
		res, err := inboundRaw(t, s, tg, map[string]any{"sessionKey": toolsGroupKey, "channel": "telegram", "from": from, "to": "-100", "text": "list", "wait": true})
		if err != nil || res["status"] != "ok" {
			t.Fatalf("turn from %s: %v %v", from, res, err)
		}
		return res["reply"].(string)
	}
	const denied = "sessions_list is not available to group -100 of telegram (channels.telegram.groups[-100].toolsBySender[id:42].deny)"
	if r := turn("42"); !strings.Contains(r, denied) {
		t.Fatalf("member 42's run: %q, want the 403 %q", r, denied)
	}
	if r := turn("7"); strings.Contains(r, "not available") || !strings.Contains(r, `"sessions"`) {
		t.Fatalf("member 7's run: %q, want the list", r)
	}
}
