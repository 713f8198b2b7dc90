package routing

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

func router(t *testing.T, edit func(c *config.Config)) *Router {
	t.Helper()
	c := config.Default()
	if edit != nil {
		edit(c)
	}
	if err := c.Validate(nil); err != nil {
		t.Fatal(err)
	}
	return New(c)
}

func scope(s string) func(c *config.Config) {
	return func(c *config.Config) { c.Session.DMScope = s }
}

// TestKeysOfTheReferenceTable: one message of each shape the reference's key
// table (and OpenClaw's channel docs) lists, under each dmScope.
func TestKeysOfTheReferenceTable(t *testing.T) {
	links := func(c *config.Config) {
		c.Session.IdentityLinks = map[string][]string{"alice": {"telegram:111", "discord:222", "+15550001"}}
	}
	tests := []struct {
		name string
		edit []func(c *config.Config)
		m    Message
		want string
	}{
		{"dm main", nil, Message{Channel: "telegram", From: "4242"}, "agent:main:main"},
		{"dm main, mainKey", []func(*config.Config){func(c *config.Config) { c.Session.MainKey = " Primary " }}, Message{Channel: "telegram", From: "4242"}, "agent:main:primary"},
		{"dm per-peer", []func(*config.Config){scope("per-peer")}, Message{Channel: "telegram", From: "User42"}, "agent:main:direct:user42"},
		{"dm per-channel-peer", []func(*config.Config){scope("per-channel-peer")}, Message{Channel: "slack", From: "U0ABC"}, "agent:main:slack:direct:u0abc"},
		{"dm per-account-channel-peer", []func(*config.Config){scope("per-account-channel-peer")}, Message{Channel: "slack", AccountID: "Work Space", From: "U0ABC"}, "agent:main:slack:work-space:direct:u0abc"},
		{"dm per-account-channel-peer, no account", []func(*config.Config){scope("per-account-channel-peer")}, Message{Channel: "slack", From: "U0ABC"}, "agent:main:slack:default:direct:u0abc"},
		{"dm chatType dm", []func(*config.Config){scope("per-peer")}, Message{Channel: "signal", From: "+15551234567", ChatType: "dm"}, "agent:main:direct:+15551234567"},
		{"identityLinks scoped", []func(*config.Config){scope("per-peer"), links}, Message{Channel: "telegram", From: "111"}, "agent:main:direct:alice"},
		{"identityLinks other channel", []func(*config.Config){scope("per-channel-peer"), links}, Message{Channel: "discord", From: "222"}, "agent:main:discord:direct:alice"},
		{"identityLinks bare", []func(*config.Config){scope("per-peer"), links}, Message{Channel: "whatsapp", From: "+15550001"}, "agent:main:direct:alice"},
		{"identityLinks not for main", []func(*config.Config){links}, Message{Channel: "telegram", From: "111"}, "agent:main:main"},
		{"identityLinks other peer", []func(*config.Config){scope("per-peer"), links}, Message{Channel: "telegram", From: "222"}, "agent:main:direct:222"},
		{"group", nil, Message{Channel: "telegram", From: "1", GroupID: "-1001234567890"}, "agent:main:telegram:group:-1001234567890"},
		{"channel", nil, Message{Channel: "discord", From: "1", ChatType: "channel", GroupID: "123456"}, "agent:main:discord:channel:123456"},
		{"group lower-cased", nil, Message{Channel: "slack", From: "1", ChatType: "Channel", GroupID: "C0AbC"}, "agent:main:slack:channel:c0abc"},
		{"telegram topic", nil, Message{Channel: "telegram", From: "1", GroupID: "-1001234567890", ThreadID: "42"}, "agent:main:telegram:group:-1001234567890:topic:42"},
		{"discord thread", nil, Message{Channel: "discord", From: "1", ChatType: "channel", GroupID: "123456", ThreadID: "987654"}, "agent:main:discord:channel:123456:thread:987654"},
		{"slack thread lower-cased", nil, Message{Channel: "slack", From: "1", ChatType: "channel", GroupID: "C1", ThreadID: "1700000000.1234AB"}, "agent:main:slack:channel:c1:thread:1700000000.1234ab"},
		{"dm thread on main", nil, Message{Channel: "slack", From: "U1", ThreadID: "171"}, "agent:main:main:thread:171"},
		{"google chat space", nil, Message{Channel: "googlechat", From: "users/1", GroupID: "spaces/AAAAx1B"}, "agent:main:googlechat:group:spaces/aaaax1b"},
		{"google chat thread", nil, Message{Channel: "googlechat", From: "users/1", GroupID: "spaces/AAAA", ThreadID: "spaces/AAAA/threads/Q1"}, "agent:main:googlechat:group:spaces/aaaa:thread:spaces/aaaa/threads/q1"},
		{"signal group keeps case", nil, Message{Channel: "signal", From: "+1555", GroupID: "q1W2e3R4+/u7I8o9P0=="}, "agent:main:signal:group:q1W2e3R4+/u7I8o9P0=="},
		{"matrix room keeps case", nil, Message{Channel: "matrix", From: "@u:hs", ChatType: "channel", GroupID: "!RoomA:example.org", ThreadID: "$Ev1"}, "agent:main:matrix:channel:!RoomA:example.org:thread:$Ev1"},
		{"matrix room on an IPv6 server", nil, Message{Channel: "matrix", From: "@u:hs", ChatType: "channel", GroupID: "!R:[2001:db8::1]"}, "agent:main:matrix:channel:!R:[2001:db8::1]"},
		{"teams channel id", nil, Message{Channel: "msteams", From: "29:1a", ChatType: "channel", GroupID: "19:AbC@thread.tacv2"}, "agent:main:msteams:channel:19:abc@thread.tacv2"},
		{"whatsapp group", nil, Message{Channel: "whatsapp", From: "+1555", GroupID: "120363-1@G.US"}, "agent:main:whatsapp:group:120363-1@g.us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := router(t, func(c *config.Config) {
				for _, e := range tt.edit {
					e(c)
				}
			})
			got, err := r.Resolve(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if got.SessionKey != tt.want {
				t.Fatalf("key %q, want %q", got.SessionKey, tt.want)
			}
			if err := rules.ValidateSessionKeyInput(got.SessionKey); err != nil {
				t.Fatalf("the routed key is refused at the edge: %v", err)
			}
		})
	}
}

// TestThousandDirectMessages: 1,000 direct messages from 100 peers on three
// channels (two accounts) give, under each dmScope, exactly the keys the
// reference's table writes out, and as many distinct sessions as the scope
// isolates.
func TestThousandDirectMessages(t *testing.T) {
	channels := []string{"telegram", "slack", "googlechat"}
	peer := func(i int) string { return fmt.Sprintf("Peer/%02d+X", i%100) }
	wantDistinct := map[string]int{DMScopeMain: 1, DMScopePerPeer: 100, DMScopePerChannelPeer: 300, DMScopePerAccountChannelPeer: 600}
	for _, s := range []string{DMScopeMain, DMScopePerPeer, DMScopePerChannelPeer, DMScopePerAccountChannelPeer} {
		t.Run(s, func(t *testing.T) {
			r := router(t, scope(s))
			seen := map[string]bool{}
			for i := 0; i < 1000; i++ {
				ch, acct := channels[i%3], []string{"", "Work"}[(i/300)%2]
				got, err := r.Resolve(Message{Channel: ch, AccountID: acct, From: peer(i)})
				if err != nil {
					t.Fatal(err)
				}
				p := strings.ToLower(peer(i))
				want := map[string]string{
					DMScopeMain:                  "agent:main:main",
					DMScopePerPeer:               "agent:main:direct:" + p,
					DMScopePerChannelPeer:        "agent:main:" + ch + ":direct:" + p,
					DMScopePerAccountChannelPeer: "agent:main:" + ch + ":" + map[string]string{"": "default", "Work": "work"}[acct] + ":direct:" + p,
				}[s]
				if got.SessionKey != want {
					t.Fatalf("message %d: %q, want %q", i, got.SessionKey, want)
				}
				seen[got.SessionKey] = true
			}
			if len(seen) != wantDistinct[s] {
				t.Fatalf("%d distinct sessions, want %d", len(seen), wantDistinct[s])
			}
		})
	}
}

// TestBindings: the agent comes from OpenClaw's tiers, in its order.
func TestBindings(t *testing.T) {
	r := router(t, func(c *config.Config) {
		c.Session.DMScope = "per-channel-peer"
		c.Agents.List = []config.Agent{{ID: "main"}, {ID: "support", Default: true}, {ID: "vip"}, {ID: "ops"}, {ID: "work"}, {ID: "groups"}}
		c.Bindings = []config.Binding{
			{AgentID: "ops", Match: config.BindingMatch{Channel: "discord", GuildID: "g1"}},
			{AgentID: "work", Match: config.BindingMatch{Channel: "slack", AccountID: "*"}},
			{AgentID: "ops", Match: config.BindingMatch{Channel: "slack", AccountID: "corp"}},
			{AgentID: "groups", Match: config.BindingMatch{Channel: "telegram", Peer: &config.BindingPeer{Kind: "channel", ID: "*"}}},
			{AgentID: "vip", Match: config.BindingMatch{Channel: "telegram", Peer: &config.BindingPeer{Kind: "direct", ID: "777"}}},
			{AgentID: "ops", Match: config.BindingMatch{Channel: "telegram"}},
		}
	})
	tests := []struct {
		m                Message
		agent, by, wantK string
	}{
		{Message{Channel: "telegram", From: "777"}, "vip", "binding.peer", "agent:vip:telegram:direct:777"},
		{Message{Channel: "telegram", From: "778"}, "ops", "binding.account", "agent:ops:telegram:direct:778"},
		{Message{Channel: "telegram", AccountID: "second", From: "778"}, "support", "default", "agent:support:telegram:direct:778"},
		{Message{Channel: "telegram", From: "1", GroupID: "-100"}, "groups", "binding.peer.wildcard", "agent:groups:telegram:group:-100"},
		{Message{Channel: "slack", AccountID: "corp", From: "U1"}, "ops", "binding.account", "agent:ops:slack:direct:u1"},
		{Message{Channel: "slack", AccountID: "other", From: "U1"}, "work", "binding.channel", "agent:work:slack:direct:u1"},
		{Message{Channel: "discord", From: "1"}, "support", "default", "agent:support:discord:direct:1"},
		{Message{Channel: "discord", From: "1", AgentID: "VIP"}, "vip", "explicit", "agent:vip:discord:direct:1"},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.m)
		if err != nil {
			t.Fatal(err)
		}
		if got.AgentID != tt.agent || got.MatchedBy != tt.by || got.SessionKey != tt.wantK {
			t.Errorf("%+v: agent %s by %s key %s, want %s by %s key %s", tt.m, got.AgentID, got.MatchedBy, got.SessionKey, tt.agent, tt.by, tt.wantK)
		}
	}
	if _, err := r.Resolve(Message{Channel: "discord", From: "1", AgentID: "nobody"}); err == nil || !strings.Contains(err.Error(), `agentId "nobody" is not in agents.list`) {
		t.Errorf("unknown explicit agent: %v", err)
	}
}

// TestResolveRefuses: each bad message is a clear input error. An id whose
// ":"-separated parts would read as the key's own (a group "gx:thread:t1"
// is thread t1 of group gx) is refused, whatever its case.
func TestResolveRefuses(t *testing.T) {
	r := router(t, scope("per-peer"))
	tests := []struct {
		m    Message
		want string
	}{
		{Message{From: "1"}, "channel required"},
		{Message{Channel: "telegram", From: "  "}, "from required"},
		{Message{Channel: "telegram", From: "1", ChatType: "room"}, `chatType "room" is unknown: use direct, group or channel`},
		{Message{Channel: "telegram", From: "1", ChatType: "group"}, "groupId required: a group message names its group id"},
		{Message{Channel: "telegram", From: "1", ChatType: "direct", GroupID: "g"}, "groupId is set but chatType is direct"},
		{Message{Channel: "whatsapp", From: "1", ThreadID: "t"}, "channel whatsapp has no threads"},
		{Message{Channel: "signal", From: "1", GroupID: "g", ThreadID: "t"}, "channel signal has no threads"},
		{Message{Channel: "telegram", From: strings.Repeat("é", 120)}, "the session key this message routes to is 258 bytes, over the 256"},
		{Message{Channel: "telegram", From: "a b"}, "cannot be part of a session key"},
		{Message{Channel: "telegram", From: "1", AgentID: "a.b"}, `agentId "a.b" is not a valid agent id`},
		{Message{Channel: "discord", From: "1", GroupID: "gx:thread:t1"}, `groupId "gx:thread:t1" cannot be part of a session key: it has a "thread" part`},
		{Message{Channel: "matrix", From: "1", GroupID: "!r:THREAD:x"}, `groupId "!r:THREAD:x" cannot be part of a session key: it has a "thread" part`},
		{Message{Channel: "telegram", From: "1", GroupID: "-1:topic:5"}, `it has a "topic" part`},
		{Message{Channel: "slack", From: "1", ChatType: "channel", GroupID: "direct:u"}, `it has a "direct" part`},
		{Message{Channel: "slack", From: "1", GroupID: "x:channel:y"}, `it has a "channel" part`},
		{Message{Channel: "slack", From: "1", GroupID: "x:dm"}, `it has a "dm" part`},
		{Message{Channel: "slack", From: "u:group:g"}, `from "u:group:g" cannot be part of a session key: it has a "group" part`},
		{Message{Channel: "slack", From: "1", ThreadID: "thread:1"}, `threadId "thread:1" cannot be part of a session key`},
		{Message{Channel: "slack", From: "1", GroupID: "g:"}, `groupId "g:" cannot be part of a session key: it starts or ends with ":"`},
	}
	for _, tt := range tests {
		_, err := r.Resolve(tt.m)
		var ie *rules.InputError
		if !errors.As(err, &ie) || !strings.Contains(ie.Msg, tt.want) {
			t.Errorf("%+v: got %v, want an input error with %q", tt.m, err, tt.want)
		}
	}
}

// TestConfigRefuses: a routing value OpenClaw's schema refuses stops the
// load with the key named.
func TestConfigRefuses(t *testing.T) {
	tests := []struct {
		edit func(c *config.Config)
		want string
	}{
		{scope("per-sender"), `session.dmScope "per-sender" must be main, per-peer, per-channel-peer or per-account-channel-peer`},
		{func(c *config.Config) { c.Session.IdentityLinks = map[string][]string{"bob": {" "}} }, "session.identityLinks.bob has an empty id"},
		{func(c *config.Config) {
			c.Bindings = []config.Binding{{AgentID: "x!", Match: config.BindingMatch{Channel: "slack"}}}
		}, `bindings[0].agentId "x!" must match`},
		{func(c *config.Config) { c.Bindings = []config.Binding{{AgentID: "main"}} }, "bindings[0].match.channel is required"},
		{func(c *config.Config) {
			c.Bindings = []config.Binding{{AgentID: "main", Match: config.BindingMatch{Channel: "slack", Peer: &config.BindingPeer{Kind: "room", ID: "1"}}}}
		}, `bindings[0].match.peer.kind "room" must be direct, group or channel`},
		{func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "main"}}
			c.Bindings = []config.Binding{{AgentID: "ghost", Match: config.BindingMatch{Channel: "slack"}}}
		}, `bindings[0].agentId "ghost" is not in agents.list`},
	}
	for _, tt := range tests {
		c := config.Default()
		tt.edit(c)
		if err := c.Validate(nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
}
