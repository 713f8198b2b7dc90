package sanitize

import (
	"strings"
	"testing"
)

func TestTruncateUTF16(t *testing.T) {
	emoji := "😀"
	tests := []struct {
		name      string
		in        string
		want      string
		truncated bool
	}{
		{"exactly 4000 kept", strings.Repeat("a", 4000), strings.Repeat("a", 4000), false},
		{"4001 cut", strings.Repeat("a", 4001), strings.Repeat("a", 4000) + TruncatedMarker, true},
		{"4000 units of astral kept", strings.Repeat(emoji, 2000), strings.Repeat(emoji, 2000), false},
		{"pair at the boundary cut before it", strings.Repeat("a", 3999) + emoji, strings.Repeat("a", 3999) + TruncatedMarker, true},
		{"pair ending at the boundary kept whole", strings.Repeat("a", 3998) + emoji + "b", strings.Repeat("a", 3998) + emoji + TruncatedMarker, true},
		{"multi-byte BMP counts one unit", strings.Repeat("é", 4000), strings.Repeat("é", 4000), false},
		{"multi-byte BMP cut", strings.Repeat("é", 4001), strings.Repeat("é", 4000) + TruncatedMarker, true},
		{"empty", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := TruncateUTF16(tc.in, HistoryTextMaxChars)
			if got != tc.want || cut != tc.truncated {
				t.Fatalf("got (%d units, %v), want (%d units, %v)", utf16Len(got), cut, utf16Len(tc.want), tc.truncated)
			}
			if n := utf16Len(got); n > HistoryTextMaxChars+14 {
				t.Fatalf("result has %d units, bound is 4014", n)
			}
		})
	}
	if utf16Len(TruncatedMarker) != 14 || TruncatedMarker != "\n\u2026(truncated)\u2026" {
		t.Fatal("marker literal")
	}
	if HistoryTextMaxChars != 4000 {
		t.Fatal("limit literal")
	}
}

func TestUTF16Helpers(t *testing.T) {
	s := "a😀b\xffc"
	if utf16Len(s) != 6 {
		t.Fatalf("utf16Len = %d", utf16Len(s))
	}
	if s[:utf16PrefixEnd(s, 2)] != "a" || s[:utf16PrefixEnd(s, 3)] != "a😀" {
		t.Fatal("prefix must not split a pair")
	}
	if s[utf16SuffixStart(s, 4)] != 'b' || s[utf16SuffixStart(s, 5):] != "😀b\xffc" {
		t.Fatal("suffix must not split a pair")
	}
}
