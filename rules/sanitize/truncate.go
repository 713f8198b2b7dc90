package sanitize

// HistoryTextMaxChars is SESSIONS_HISTORY_TEXT_MAX_CHARS: the longest text
// field sessions_history returns, in UTF-16 code units.
const HistoryTextMaxChars = 4000

// TruncatedMarker ends a cut text field: newline, U+2026, "(truncated)",
// U+2026 — 14 UTF-16 units, so a cut field is at most 4014 units long.
const TruncatedMarker = "\n…(truncated)…"

// TruncateUTF16 keeps s when it is at most max UTF-16 code units long (the
// reference's String.length). Otherwise it cuts s to max units, one fewer when
// the cut would split a surrogate pair, appends TruncatedMarker and reports
// true.
func TruncateUTF16(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false // a byte count bounds the unit count
	}
	cut := utf16PrefixEnd(s, max)
	if cut == len(s) {
		return s, false
	}
	return s[:cut] + TruncatedMarker, true
}
