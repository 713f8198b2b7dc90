package sanitize

import "testing"

func TestJSRegexSemantics(t *testing.T) {
	tests := []struct {
		src, flags, in string
		match          bool
	}{
		{`[^a]`, "i", "A", false}, // folded before negation
		{`[^a]`, "i", "b", true},
		{`s`, "i", "ſ", false},      // no non-ASCII → ASCII folding
		{`k`, "i", "\u212a", false}, // Kelvin sign
		{`é`, "i", "É", true},       // non-ASCII letters still fold
		{`\s`, "", "\u00a0", true},  // JavaScript whitespace
		{`\s`, "", "\u3000", true},
		{`\S`, "", "\ufeff", false},
		{`^a.c$`, "", "a\rc", false}, // . excludes line terminators
		{`^a.c$`, "s", "a\nc", true},
		{`^b`, "m", "a\nb", true},
		{`^b`, "", "a\nb", false},
		{`\u0041\x42`, "", "AB", true},
		{`\uD83D\uDE00`, "", "😀", true},
		{`\cJ`, "", "\n", true},
		{`[\b]`, "", "\b", true},
		{`a{`, "", "a{", true}, // not a quantifier: literal
		{`a{2}`, "", "aa", true},
		{`[\d-z]`, "", "-", true},
		{`[\d-z]`, "", "m", false},
		{`\/\.`, "", "/.", true},
		{`\a`, "", "a", true}, // identity escape, not Go's bell
		{`(?<n>x)y`, "", "xy", true},
		{`\p{L}`, "u", "é", true},
		{`\p{L}`, "", "p{L}", true},
		{`[]`, "", "a", false},
	}
	for _, tc := range tests {
		re, err := compileJSRegex(tc.src, tc.flags)
		if err != nil {
			t.Fatalf("compile %q/%s: %v", tc.src, tc.flags, err)
		}
		if got := re.re.MatchString(tc.in); got != tc.match {
			t.Fatalf("/%s/%s on %q = %v, want %v", tc.src, tc.flags, tc.in, got, tc.match)
		}
	}
	for _, bad := range []string{`(a)\1`, `a(?!b)`, `(?<!a)b`, `[a`, `a**`, `\`} {
		if _, err := compileJSRegex(bad, ""); err == nil {
			t.Fatalf("%q should not compile", bad)
		}
	}
}

func TestStickyFlag(t *testing.T) {
	r, err := NewRedactor("", []string{"/a/y"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Log("aab a"); got != "******b a" {
		t.Fatalf("sticky: %q", got)
	}
}

func TestNestedRepetition(t *testing.T) {
	for src, want := range map[string]bool{
		"(a+)+":      true,
		"(a*)*":      true,
		"(a?)?":      true,
		"((ab)+)+":   true,
		"(a|aa)+":    true,
		"(a|b)+":     false,
		"(ab)+":      false,
		"a+b+":       false,
		"[a+]+":      false,
		`\(a+\)+`:    false,
		"(?:x{2})*":  true,
		"(a|bc){2}":  false,
		"x(a|bc)*":   true,
		"^[a-z]+$":   false,
		"(foo|bar)+": false,
	} {
		if got := hasNestedRepetition(src); got != want {
			t.Fatalf("hasNestedRepetition(%q) = %v, want %v", src, got, want)
		}
	}
}
