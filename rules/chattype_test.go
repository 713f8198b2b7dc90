package rules

import "testing"

func TestChatTypeFromKey(t *testing.T) {
	tests := map[string]string{
		"agent:main:slack:channel:c123":             ChatChannel,
		"agent:main:discord:group:1":                ChatGroup,
		"discord:group:1":                           ChatGroup,
		"agent:main:telegram:direct:bob":            ChatDirect,
		"agent:main:telegram:dm:bob":                ChatDirect,
		"agent:main:direct:bob":                     ChatDirect,
		"agent:main:whatsapp:acct:direct:+1555":     ChatDirect,
		"agent:main:group:abc":                      ChatGroup,
		"group:abc":                                 ChatGroup,
		"agent:main:120363-1234@g.us":               ChatGroup,
		"120363@g.us":                               ChatGroup,
		"agent:main:whatsapp:120363-1@G.US":         ChatGroup,
		"whatsapp:foo@g.us":                         ChatGroup,
		"whatsapp:@g.us":                            ChatUnknown,
		"agent:main:discord:guild-1:channel-2":      ChatChannel,
		"agent:main:discord:acct:guild-1:channel-2": ChatChannel,
		"agent:main:discord:a:b:guild-1:channel-2":  ChatUnknown,
		"agent:main:main":                           ChatUnknown,
		"agent:main:cron:nightly":                   ChatUnknown,
		"agent:main:slack:channel:c1:thread:9":      ChatChannel,
		"main":                                      ChatUnknown,
		"":                                          ChatUnknown,
		"agent:main:x:group:y:channel:z":            ChatGroup, // group token checked first
	}
	for in, want := range tests {
		if got := ChatTypeFromKey(in); got != want {
			t.Errorf("ChatTypeFromKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChannelFromKey(t *testing.T) {
	tests := map[string]string{
		"agent:main:slack:channel:c1":    "slack",
		"agent:main:Discord:group:1":     "discord",
		"discord:group:1":                "discord",
		"discord:group":                  "",
		"agent:main:telegram:direct:bob": "",
		"agent:main:main":                "",
	}
	for in, want := range tests {
		if got := channelFromKey(in); got != want {
			t.Errorf("channelFromKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeChatType(t *testing.T) {
	tests := map[string]string{"dm": ChatDirect, " Direct ": ChatDirect, "GROUP": ChatGroup, "channel": ChatChannel, "unknown": "", "room": "", "": ""}
	for in, want := range tests {
		if got := normalizeChatType(in); got != want {
			t.Errorf("normalizeChatType(%q) = %q, want %q", in, got, want)
		}
	}
}
