package rules

import "testing"

func TestClassifyAndKind(t *testing.T) {
	perSender := ResolveAlias("", "")
	tests := []struct {
		key, chatType   string
		class, toolKind string
	}{
		// Confirmed [B] projections.
		{"agent:main:main", "", ClassMain, KindMain},
		{"agent:main:slack:channel:C123", "channel", ClassChannel, KindGroup},
		{"agent:main:cron:nightly", "", ClassCron, KindCron},
		{"agent:main:hook:deploy", "", ClassHook, KindHook},
		{"agent:main:node-device", "", ClassNode, KindNode},
		{"agent:main:subagent:child", "", ClassSubagent, KindOther},
		// Legacy bare keys.
		{"main", "", ClassMain, KindMain},
		{"cron:x", "", ClassCron, KindCron},
		{"hook:x", "", ClassHook, KindHook},
		{"node-x", "", ClassNode, KindNode},
		{"node:x", "", ClassNode, KindNode},
		{"discord:group:1", "", ClassGroup, KindGroup},
		{"subagent:x", "", ClassSubagent, KindOther},
		{"acp:x", "", ClassAcp, KindOther},
		// Sentinels.
		{"global", "", ClassGlobal, KindMain},
		{"unknown", "", ClassUnknown, KindOther},
		{"", "", ClassUnknown, KindOther},
		// Other agent-scoped shapes.
		{"AGENT:Ops:Main", "", ClassMain, KindMain},
		{"agent:main:cron:nightly:run:r1", "", ClassCron, KindCron},
		{"agent:main:node:device", "", ClassNode, KindNode},
		{"agent:main:acp:session", "", ClassAcp, KindOther},
		{"agent:main:dashboard:abc", "", ClassDashboard, KindOther},
		{"agent:main:slack:channel:c1", "", ClassChannel, KindGroup},
		{"agent:main:discord:group:1", "", ClassGroup, KindGroup},
		{"agent:main:whatsapp:120363-1@g.us", "", ClassGroup, KindGroup},
		{"agent:main:discord:guild-1:channel-2", "", ClassChannel, KindGroup},
		{"agent:main:telegram:direct:bob", "", ClassDirect, KindOther},
		{"agent:main:direct:bob", "", ClassDirect, KindOther},
		{"agent:main:telegram:dm:bob", "", ClassDirect, KindOther},
		{"agent:main:webchat:abc", "group", ClassGroup, KindGroup}, // row chatType wins
		{"agent:main:webchat:abc", "dm", ClassDirect, KindOther},
		{"agent:main:webchat:abc", "", ClassCustom, KindOther},
		{"agent::broken", "", ClassCustom, KindOther},
		{"my-custom-key", "", ClassCustom, KindOther},
		// Threads take the kind of their parent conversation.
		{"agent:main:slack:channel:c1:thread:171", "", ClassThread, KindGroup},
		{"agent:main:discord:group:1:thread:9", "", ClassThread, KindGroup},
		{"agent:main:telegram:direct:bob:thread:9", "", ClassThread, KindOther},
		{"agent:main:webchat:x:thread:9", "channel", ClassThread, KindGroup},
		{"agent:main:main:thread:9", "", ClassThread, KindOther},
		{"agent:main:cron:nightly:thread:9", "", ClassCron, KindCron}, // prefix classes come first
		{"agent:main:slack:channel:c1:thread:", "", ClassChannel, KindGroup},
	}
	for _, tt := range tests {
		if got := Classify(tt.key, perSender, tt.chatType); got != tt.class {
			t.Errorf("Classify(%q, chatType=%q) = %q, want %q", tt.key, tt.chatType, got, tt.class)
		}
		if got := Kind(tt.key, perSender, tt.chatType); got != tt.toolKind {
			t.Errorf("Kind(%q, chatType=%q) = %q, want %q", tt.key, tt.chatType, got, tt.toolKind)
		}
	}
}

func TestClassifyCustomMainKey(t *testing.T) {
	a := ResolveAlias(" Primary ", "global")
	tests := map[string]string{
		"agent:main:primary": ClassMain,
		"primary":            ClassMain,
		"global":             ClassGlobal,
		"agent:main:main":    ClassCustom, // not the configured main key
	}
	for key, want := range tests {
		if got := Classify(key, a, ""); got != want {
			t.Errorf("Classify(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestPeerKind(t *testing.T) {
	tests := []struct{ key, chatType, want string }{
		{"agent:main:slack:channel:c1:thread:1", "", ClassChannel},
		{"agent:main:discord:group:1", "", ClassGroup},
		{"agent:main:telegram:direct:bob:thread:2", "", ClassDirect},
		{"agent:main:main", "", ""},
		{"agent:main:x:thread:1", "group", ClassGroup},
	}
	for _, tt := range tests {
		if got := PeerKind(tt.key, tt.chatType); got != tt.want {
			t.Errorf("PeerKind(%q, %q) = %q, want %q", tt.key, tt.chatType, got, tt.want)
		}
	}
}

func TestToolKind(t *testing.T) {
	tests := []struct{ class, peer, want string }{
		{"main", "", KindMain},
		{"global", "", KindMain},
		{"group", "", KindGroup},
		{"channel", "", KindGroup},
		{"cron", "", KindCron},
		{"hook", "", KindHook},
		{"node", "", KindNode},
		{"thread", "group", KindGroup},
		{"thread", "channel", KindGroup},
		{"thread", "direct", KindOther},
		{"thread", "", KindOther},
		{"subagent", "", KindOther},
		{"dashboard", "", KindOther},
		{"custom", "", KindOther},
		{"direct", "", KindOther},
		{"acp", "", KindOther},
		{"unknown", "", KindOther},
		{"something-new", "", KindOther},
		{"MAIN", "", KindMain},
	}
	for _, tt := range tests {
		if got := ToolKind(tt.class, tt.peer); got != tt.want {
			t.Errorf("ToolKind(%q, %q) = %q, want %q", tt.class, tt.peer, got, tt.want)
		}
	}
}

func TestIsToolKind(t *testing.T) {
	for _, k := range []string{"main", "group", "cron", "hook", "node", "other"} {
		if !IsToolKind(k) {
			t.Errorf("IsToolKind(%q) = false", k)
		}
	}
	for _, k := range []string{"", "channel", "subagent", "Main"} {
		if IsToolKind(k) {
			t.Errorf("IsToolKind(%q) = true", k)
		}
	}
}

func TestDeriveChannel(t *testing.T) {
	tests := []struct {
		kind, row, origin, last, key, want string
	}{
		{KindCron, "slack", "", "", "agent:main:cron:x", ChannelInternal},
		{KindHook, "", "", "", "agent:main:hook:x", ChannelInternal},
		{KindNode, "", "", "", "agent:main:node-x", ChannelInternal},
		{KindGroup, "Slack", "discord", "telegram", "agent:main:whatsapp:group:1", "Slack"},
		{KindGroup, " ", "discord", "telegram", "", "discord"},
		{KindOther, "", "", "telegram", "", "telegram"},
		{KindGroup, "", "", "", "agent:main:Discord:group:1", "discord"}, // agent prefix stripped [B]
		{KindGroup, "", "", "", "slack:channel:c1", "slack"},
		{KindMain, "", "", "", "agent:main:main", ChannelUnknown},
		{KindOther, "", "", "", "agent:main:telegram:direct:bob", ChannelUnknown},
	}
	for _, tt := range tests {
		if got := DeriveChannel(tt.kind, tt.row, tt.origin, tt.last, tt.key); got != tt.want {
			t.Errorf("DeriveChannel(%q, %q, %q, %q, %q) = %q, want %q", tt.kind, tt.row, tt.origin, tt.last, tt.key, got, tt.want)
		}
	}
}
