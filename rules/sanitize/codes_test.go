package sanitize

import (
	"reflect"
	"strings"
	"testing"
)

func TestFindCodeRegions(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []region
	}{
		{"none", "plain text", nil},
		{"fenced closed", "a\n```js\nx\n```\nb", []region{{2, 14}}},
		{"fenced closed at end", "```\nx\n```", []region{{0, 9}}},
		{"fenced tilde", "~~~\n<x>\n~~~\nafter", []region{{0, 12}}},
		{"fenced unclosed runs to end", "a\n```\n<think>x", []region{{2, 14}}},
		{"fence needs newline after opening line", "a\n```<think>", nil},
		// The inline regex also runs over fence characters: "```\nx\n```" here
		// is an inline span because its fence does not start a line.
		{"fence must start a line", "a ```\nx\n```\n", []region{{2, 11}, {8, 12}}},
		{"closing fence must be exactly three chars", "```\nx\n````\ny", []region{{0, 12}}},
		{"closing fence with info string does not close", "```\nx\n```js\ny", []region{{0, 13}}},
		{"mismatched fence char does not close", "```\nx\n~~~\ny", []region{{0, 11}}},
		// The closing fence's newline is consumed, so a fence on the very next
		// line is not an opening fence (V8 behaves the same way).
		{"adjacent block not seen", "```\na\n```\n```\nb\n```", []region{{0, 10}, {10, 19}}},
		{"blank line separates blocks", "```\na\n```\n\n```\nb\n```", []region{{0, 10}, {11, 20}}},
		{"inline", "use `x` here", []region{{4, 7}}},
		{"inline runs need not be equal", "a ``x`y`` b", []region{{2, 6}}},
		{"inline unclosed", "a `x", nil},
		{"inline inside fence is absorbed", "```\n`x`\n```", []region{{0, 11}}},
		{"inline crossing a fence is kept", "`a\n```\nb` c\n```", []region{{0, 6}, {3, 15}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := findCodeRegions(tc.in).rs
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("findCodeRegions(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestCodeRegionQueries(t *testing.T) {
	in := "`a\n```\nb` c\n```"
	c := findCodeRegions(in)
	for pos := 0; pos < len(in); pos++ {
		if !c.contains(pos) {
			t.Fatalf("position %d should be inside code", pos)
		}
	}
	c = findCodeRegions("x `y` z")
	if c.contains(1) || !c.contains(2) || !c.contains(4) || c.contains(5) {
		t.Fatal("inline span bounds wrong")
	}
	if !c.overlaps(0, 3) || c.overlaps(0, 2) || !c.overlaps(4, 7) || c.overlaps(5, 7) {
		t.Fatal("overlap query wrong")
	}
}

func TestCodeRegionsLinearOnBackticks(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("`", 1<<20),
		strings.Repeat("`a", 1<<19),
		strings.Repeat("\n```", 1<<18),
		strings.Repeat("```\n", 1<<18),
		"`" + strings.Repeat("a", 1<<20),
	} {
		findCodeRegions(in)
	}
}
