package handlers

import (
	"strings"
)

const (
	provenanceInterSession = "inter_session"
	sendToolName           = "sessions_send"
)

// a2aContextPrompt is the `Agent-to-agent message context:` block given to
// the target as extra system prompt; absent lines are skipped.
func a2aContextPrompt(requesterKey, requesterChannel, targetDisplayKey string) string {
	lines := []string{"Agent-to-agent message context:"}
	if requesterKey != "" {
		lines = append(lines, "Agent 1 (requester) session: "+requesterKey+".")
	}
	if requesterChannel != "" {
		lines = append(lines, "Agent 1 (requester) channel: "+requesterChannel+".")
	}
	if targetDisplayKey != "" {
		lines = append(lines, "Agent 2 (target) session: "+targetDisplayKey+".")
	}
	return strings.Join(lines, "\n")
}
