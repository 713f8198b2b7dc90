package config

import "testing"

// TestCommandOwner: commands.ownerAllowFrom entries as OpenClaw writes
// them: "<channel>:<id>", a bare id (any channel), "*", "<channel>:*".
func TestCommandOwner(t *testing.T) {
	c := &Config{Commands: Commands{OwnerAllowFrom: []string{"Telegram:42", "U123", " slack:* "}}}
	for _, tc := range []struct {
		channel, from string
		want          bool
	}{
		{"telegram", "42", true},
		{"discord", "42", false},
		{"discord", "U123", true},
		{"slack", "anyone", true},
		{"telegram", "4", false},
		{"telegram", "", false},
		{"signal", "u123", false}, // ids compare as sent
	} {
		if got := c.CommandOwner(tc.channel, tc.from); got != tc.want {
			t.Errorf("CommandOwner(%q, %q) = %v, want %v", tc.channel, tc.from, got, tc.want)
		}
	}
	if (&Config{}).CommandOwner("telegram", "42") {
		t.Error("no ownerAllowFrom: nobody is an owner")
	}
	if !(&Config{Commands: Commands{OwnerAllowFrom: []string{"*"}}}).CommandOwner("telegram", "42") {
		t.Error(`"*": anyone is an owner`)
	}
}
