package rules

import "testing"

func TestTrimFollowsJavaScript(t *testing.T) {
	tests := map[string]string{
		"  a  ":               "a",
		"\ufeffa\ufeff":       "a",             // JavaScript trims the BOM; strings.TrimSpace does not
		"\u0085a\u0085":       "\u0085a\u0085", // NEL is not JavaScript whitespace
		"\u00a0\u2000a\u3000": "a",
		"\u2028a\u2029":       "a",
		"\t\n\v\f\ra":         "a",
		"a b":                 "a b",
	}
	for in, want := range tests {
		if got := trim(in); got != want {
			t.Errorf("trim(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFirstNonEmpty(t *testing.T) {
	if got := FirstNonEmpty("", "  ", " x ", "y"); got != "x" {
		t.Errorf("got %q", got)
	}
	if got := FirstNonEmpty("", " "); got != "" {
		t.Errorf("got %q", got)
	}
}
