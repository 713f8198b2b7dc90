package handlers

import (
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/rules"
)

// OpenClaw's lines of a child's first message.
const (
	spawnContextLine    = "[Subagent Context] You are running as a subagent (depth %d/%d). Results auto-announce to your requester; do not busy-poll for status."
	spawnPersistentLine = "[Subagent Context] This subagent session is persistent and remains available for thread follow-up messages."
	spawnTaskPrefix     = "[Subagent Task]: "
)

// spawnMessage is the child's first message, as OpenClaw words it:
// paragraphs separated by blank lines.
func spawnMessage(depth, maxDepth int, mode, task string) string {
	parts := []string{fmt.Sprintf(spawnContextLine, depth, maxDepth)}
	if mode == spawnModeSession {
		parts = append(parts, spawnPersistentLine)
	}
	parts = append(parts, spawnTaskPrefix+task)
	return strings.Join(parts, "\n\n")
}

// systemPrompt is the child's extra system prompt: its role and the rules
// of a sub-agent; the task itself is in the first message. With
// lightContext it is the role line alone. An acp child's harness also
// finds its resumeSessionId, streamTo and cwd here.
func (s *spawn) systemPrompt() string {
	r, sp := s.r, &s.sp
	lines := []string{fmt.Sprintf("# Subagent Context\nYou are a %s subagent (depth %d/%d) spawned by %s.", s.role, s.childDepth, s.maxDepth, r.alias.Display(r.key))}
	if !sp.lightContext {
		lines = append(lines,
			"- Do the task in the [Subagent Task] message; your final reply is announced to your requester automatically.",
			"- Do not busy-poll for status and do not message users directly.",
		)
		if s.role == rules.RoleOrchestrator {
			lines = append(lines, "- You may spawn your own subagents with sessions_spawn; their results arrive as messages. Use sessions_yield to wait for them.")
		} else {
			lines = append(lines, "- You cannot spawn further subagents.")
		}
		lines = append(lines, "Requester session: "+r.key, "Your session: "+s.childKey)
		if sp.label != "" {
			lines = append(lines, "Label: "+sp.label)
		}
	}
	if sp.runtime == runtimeACP {
		for _, kv := range [][2]string{{"resumeSessionId", sp.resumeSessionID}, {"streamTo", sp.streamTo}, {"cwd", sp.cwd}} {
			if kv[1] != "" {
				lines = append(lines, "ACP "+kv[0]+": "+kv[1])
			}
		}
	}
	return strings.Join(lines, "\n")
}
