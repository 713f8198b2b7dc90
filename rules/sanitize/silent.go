package sanitize

import "strings"

// IsSilentReply reports whether an assistant's text is one of OpenClaw's
// silent sentinels: NO_REPLY (nothing to tell anyone), REPLY_SKIP (end an
// agent-to-agent exchange) or ANNOUNCE_SKIP (no completion announce). Such a
// reply says nothing to a person: sessions_history drops a text-only one
// and the console hides it and does not count it as an answer.
func IsSilentReply(text string) bool {
	switch strings.TrimSpace(text) {
	case "NO_REPLY", "REPLY_SKIP", "ANNOUNCE_SKIP":
		return true
	}
	return false
}
