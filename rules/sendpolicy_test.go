package rules

import "testing"

func TestResolveSendPolicy(t *testing.T) {
	denyDiscordGroups := &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{Channel: "discord", ChatType: "group"}}}}
	tests := []struct {
		name              string
		p                 *SendPolicy
		override          string
		key, ch, chatType string
		want              string
	}{
		{"no policy", nil, "", "agent:main:main", "", "", SendAllow},
		{"override deny beats no policy", nil, "deny", "agent:main:main", "", "", SendDeny},
		{"override is case-insensitive", &SendPolicy{Default: "deny"}, " Allow ", "agent:main:main", "", "", SendAllow},
		{"invalid override ignored", &SendPolicy{Default: "deny"}, "maybe", "agent:main:main", "", "", SendDeny},
		{"empty policy", &SendPolicy{}, "", "agent:main:main", "", "", SendAllow},
		{"default deny", &SendPolicy{Default: "DENY"}, "", "agent:main:main", "", "", SendDeny},
		{"invalid default is allow", &SendPolicy{Default: "block"}, "", "agent:main:main", "", "", SendAllow},

		{"channel+chatType from key", denyDiscordGroups, "", "agent:main:discord:group:1", "", "", SendDeny},
		{"legacy key", denyDiscordGroups, "", "discord:group:1", "", "", SendDeny},
		{"other channel", denyDiscordGroups, "", "agent:main:slack:group:1", "", "", SendAllow},
		{"explicit channel wins over key", denyDiscordGroups, "", "agent:main:slack:group:1", "Discord", "", SendDeny},
		{"explicit chatType wins over key", denyDiscordGroups, "", "agent:main:discord:group:1", "", "direct", SendAllow},
		{"chatType dm equals direct", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{ChatType: "dm"}}}}, "", "agent:main:telegram:direct:bob", "", "", SendDeny},
		{"explicit dm chatType", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{ChatType: "direct"}}}}, "", "agent:main:main", "", "DM", SendDeny},
		{"unknown chat type never matches", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{ChatType: "group"}}}}, "", "agent:main:main", "", "", SendAllow},
		{"invalid rule chatType never matches", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{ChatType: "groups"}}}}, "", "agent:main:main", "", "", SendAllow},

		{"keyPrefix on stripped key", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{KeyPrefix: "cron:"}}}}, "", "agent:main:cron:nightly", "", "", SendDeny},
		{"keyPrefix on raw key", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{KeyPrefix: "agent:ops:"}}}}, "", "agent:ops:main", "", "", SendDeny},
		{"keyPrefix lower-cased", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{KeyPrefix: "CRON:"}}}}, "", "AGENT:Main:Cron:X", "", "", SendDeny},
		{"keyPrefix no match", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{KeyPrefix: "hook:"}}}}, "", "agent:main:cron:x", "", "", SendAllow},
		{"rawKeyPrefix ignores stripped key", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{RawKeyPrefix: "cron:"}}}}, "", "agent:main:cron:nightly", "", "", SendAllow},
		{"rawKeyPrefix matches raw", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{RawKeyPrefix: "Agent:Main:Cron"}}}}, "", "agent:main:cron:nightly", "", "", SendDeny},
		{"all match fields must hold", &SendPolicy{Rules: []SendRule{{Action: "deny", Match: SendMatch{Channel: "discord", KeyPrefix: "discord:group:2"}}}}, "", "agent:main:discord:group:1", "", "", SendAllow},

		{"first deny wins over earlier allow", &SendPolicy{Rules: []SendRule{
			{Action: "allow", Match: SendMatch{Channel: "discord"}},
			{Action: "deny", Match: SendMatch{ChatType: "group"}},
		}}, "", "agent:main:discord:group:1", "", "", SendDeny},
		{"deny wins over later allow", &SendPolicy{Rules: []SendRule{
			{Action: "deny", Match: SendMatch{ChatType: "group"}},
			{Action: "allow", Match: SendMatch{Channel: "discord"}},
		}}, "", "agent:main:discord:group:1", "", "", SendDeny},
		{"allow match beats default deny", &SendPolicy{Default: "deny", Rules: []SendRule{{Action: "allow", Match: SendMatch{Channel: "slack"}}}}, "", "agent:main:slack:channel:c1", "", "", SendAllow},
		{"no match falls to default deny", &SendPolicy{Default: "deny", Rules: []SendRule{{Action: "allow", Match: SendMatch{Channel: "slack"}}}}, "", "agent:main:discord:group:1", "", "", SendDeny},
		{"invalid rule action is allow", &SendPolicy{Default: "deny", Rules: []SendRule{{Action: "nope", Match: SendMatch{Channel: "slack"}}}}, "", "agent:main:slack:channel:c1", "", "", SendAllow},
		{"empty match matches all", &SendPolicy{Rules: []SendRule{{Action: "deny"}}}, "", "agent:main:main", "", "", SendDeny},
		{"override beats rules", &SendPolicy{Rules: []SendRule{{Action: "deny"}}}, "allow", "agent:main:main", "", "", SendAllow},
	}
	for _, tt := range tests {
		if got := ResolveSendPolicy(tt.p, tt.override, tt.key, tt.ch, tt.chatType); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestSendBlockedError(t *testing.T) {
	if SendBlockedError != "send blocked by session policy" {
		t.Errorf("SendBlockedError = %q", SendBlockedError)
	}
}

func TestNormalizeSendPolicy(t *testing.T) {
	tests := map[string]string{"allow": SendAllow, " DENY ": SendDeny, "": "", "inherit": ""}
	for in, want := range tests {
		if got := NormalizeSendPolicy(in); got != want {
			t.Errorf("NormalizeSendPolicy(%q) = %q, want %q", in, got, want)
		}
	}
}
