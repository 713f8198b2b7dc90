package rules

import "testing"

func TestResolveAlias(t *testing.T) {
	tests := []struct {
		mainKey, scope string
		want           Alias
	}{
		{" Primary ", "global", Alias{MainKey: "primary", Alias: "global", Scope: "global"}},
		{"", "", Alias{MainKey: "main", Alias: "main", Scope: "per-sender"}},
		{"Work", "", Alias{MainKey: "work", Alias: "work", Scope: "per-sender"}},
		{"", "per-sender", Alias{MainKey: "main", Alias: "main", Scope: "per-sender"}},
		{"", " Global ", Alias{MainKey: "main", Alias: "global", Scope: "global"}},
	}
	for _, tt := range tests {
		if got := ResolveAlias(tt.mainKey, tt.scope); got != tt.want {
			t.Errorf("ResolveAlias(%q, %q) = %+v, want %+v", tt.mainKey, tt.scope, got, tt.want)
		}
	}
}

func TestAliasDisplay(t *testing.T) {
	perSender := ResolveAlias("", "")
	global := ResolveAlias(" Primary ", "global")
	tests := []struct {
		a         Alias
		key, want string
	}{
		{perSender, "main", "main"},
		{perSender, "agent:main:main", "agent:main:main"},
		{perSender, "global", "global"},
		{perSender, "discord:group:1", "discord:group:1"},
		{global, "global", "main"},
		{global, "primary", "main"},
		{global, "main", "main"},
		{global, "Global", "Global"}, // exact comparison
		{Alias{}, "main", "main"},    // zero value behaves like the defaults
	}
	for _, tt := range tests {
		if got := tt.a.Display(tt.key); got != tt.want {
			t.Errorf("%+v.Display(%q) = %q, want %q", tt.a, tt.key, got, tt.want)
		}
	}
}

func TestAliasInternal(t *testing.T) {
	perSender := ResolveAlias("", "")
	global := ResolveAlias("", "global")
	tests := []struct {
		a                    Alias
		key, requester, want string
	}{
		{perSender, "current", "agent:main:subagent:x", "agent:main:subagent:x"},
		{perSender, "current", "", "current"},
		{perSender, "current", "  ", "current"},
		{perSender, "main", "agent:ops:main", "main"},
		{global, "main", "", "global"},
		{ResolveAlias("Primary", ""), "main", "", "primary"},
		{perSender, "agent:ops:main", "agent:main:main", "agent:ops:main"},
		{perSender, "Current", "agent:main:main", "Current"},
		{Alias{}, "main", "", "main"},
	}
	for _, tt := range tests {
		if got := tt.a.Internal(tt.key, tt.requester); got != tt.want {
			t.Errorf("%+v.Internal(%q, %q) = %q, want %q", tt.a, tt.key, tt.requester, got, tt.want)
		}
	}
}

func TestAliasStoreKey(t *testing.T) {
	perSender := ResolveAlias("", "")
	primary := ResolveAlias(" Primary ", "")
	global := ResolveAlias("", "global")
	tests := []struct {
		a                     Alias
		internal, agent, want string
	}{
		{perSender, "main", "main", "agent:main:main"},
		{perSender, "main", "ops", "agent:ops:main"},
		{perSender, "main", "Ops", "agent:ops:main"},
		{primary, "primary", "main", "agent:main:primary"},
		{primary, "main", "main", "main"}, // "main" is not the alias here (Internal maps it first)
		{global, "global", "main", "global"},
		{perSender, "global", "main", "global"},
		{perSender, "agent:ops:main", "main", "agent:ops:main"},
		{perSender, "discord:group:1", "main", "discord:group:1"},
		{Alias{}, "main", "", "agent:main:main"},
	}
	for _, tt := range tests {
		if got := tt.a.StoreKey(tt.internal, tt.agent); got != tt.want {
			t.Errorf("%+v.StoreKey(%q, %q) = %q, want %q", tt.a, tt.internal, tt.agent, got, tt.want)
		}
	}
}

func TestAliasMainSessionKey(t *testing.T) {
	tests := []struct {
		a           Alias
		agent, want string
	}{
		{ResolveAlias("", ""), "main", "agent:main:main"},
		{ResolveAlias("", ""), "Ops", "agent:ops:main"},
		{ResolveAlias("", ""), "", "agent:main:main"},
		{ResolveAlias(" Primary ", "global"), "research", "agent:research:primary"},
		{Alias{}, "ops", "agent:ops:main"},
	}
	for _, tt := range tests {
		if got := tt.a.MainSessionKey(tt.agent); got != tt.want {
			t.Errorf("%+v.MainSessionKey(%q) = %q, want %q", tt.a, tt.agent, got, tt.want)
		}
	}
}
