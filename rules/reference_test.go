package rules

import "testing"

func TestLooksLikeSessionID(t *testing.T) {
	tests := map[string]bool{
		"0f8fad5b-d9cb-469f-a165-70867728950e":     true,
		"0F8FAD5B-D9CB-469F-A165-70867728950E":     true,
		"  0f8fad5b-d9cb-469f-a165-70867728950e\n": true,
		"0f8fad5b-d9cb-469f-a165-70867728950":      false,
		"0f8fad5b-d9cb-469f-a165-70867728950e0":    false,
		"0f8fad5bd9cb469fa16570867728950e":         false,
		"g f8fad5b-d9cb-469f-a165-70867728950e":    false,
		"agent:main:main":                          false,
		"":                                         false,
	}
	for in, want := range tests {
		if got := LooksLikeSessionID(in); got != want {
			t.Errorf("LooksLikeSessionID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestLooksLikeSessionKey(t *testing.T) {
	tests := map[string]bool{
		"main":                                 true,
		"global":                               true,
		"unknown":                              true,
		"current":                              true,
		" main ":                               true,
		"acp:abc":                              true,
		"ACP:abc":                              true, // ACP check is case-insensitive
		"agent:main:acp:x":                     true,
		"agent:main:main":                      true,
		"agent::broken":                        true,
		"cron:nightly":                         true,
		"hook:x":                               true,
		"node-device":                          true,
		"node:device":                          true,
		"discord:group:1":                      true,
		"slack:channel:c1":                     true,
		"Main":                                 false, // the literal checks are case-sensitive
		"AGENT:main:main":                      false,
		"my-custom-key":                        false,
		"":                                     false,
		"0f8fad5b-d9cb-469f-a165-70867728950e": false,
	}
	for in, want := range tests {
		if got := LooksLikeSessionKey(in); got != want {
			t.Errorf("LooksLikeSessionKey(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestShouldResolveAsSessionID(t *testing.T) {
	tests := map[string]bool{
		"0f8fad5b-d9cb-469f-a165-70867728950e": true,
		"my-custom-key":                        true,
		"agent:main:main":                      false,
		"main":                                 false,
		"current":                              false,
		"discord:group:1":                      false,
	}
	for in, want := range tests {
		if got := ShouldResolveAsSessionID(in); got != want {
			t.Errorf("ShouldResolveAsSessionID(%q) = %v, want %v", in, got, want)
		}
	}
}
