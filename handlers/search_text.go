package handlers

import (
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// SearchText is what a transcript search may index of one entry: the text
// sessions_history would show of it, redacted and cut by the same rules
// (HistoryMessage, the history's drop rule), so a search never finds what
// the history tool would mask. ok is false for an entry the history never
// shows (undecodable, commentary, a suppressed reply), for a tool message
// unless withTools, and for one with no text. Thinking blocks and images
// are never text here.
func SearchText(r *sanitize.Redactor, data []byte, withTools bool) (who, text string, ok bool) {
	m, decoded := decodeMessage(data)
	if !decoded || m["type"] == "compaction" || !keepInHistory(m) {
		return "", "", false
	}
	if isToolMessage(m) && !withTools {
		return "", "", false
	}
	delete(m, runMarker)
	r.HistoryMessage(m, true)
	if text = plainText(m); text == "" {
		return "", "", false
	}
	return role(m), text, true
}

// SessionChannel is the channel a session is on, as the session
// operations' channel check reads it (the search's channel filter).
func SessionChannel(e *sessions.Entry) string { return sessionChannel(e) }
