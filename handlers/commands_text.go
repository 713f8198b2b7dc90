package handlers

import (
	"fmt"
	"strings"
	"time"
)

// OpenClaw's texts of the chat commands, in one place: docs/inbound.md
// lists them, and the table test checks each against a live worker.

// notOwnerText answers an owner-only command from a sender not in
// commands.ownerAllowFrom (OpenClaw's rejectNonOwnerCommand, with the
// hint for a config it does not edit).
func notOwnerText(channel, from string) string {
	return fmt.Sprintf("You are not authorized to use this owner-only command. Ask the operator to add `%s:%s` to `commands.ownerAllowFrom`.", channel, from)
}

// /subagents
const (
	subagentsHelpText = "Subagents\n" +
		"Usage:\n" +
		"- /subagents list\n" +
		"- /subagents kill <id|#|all>\n" +
		"- /subagents log <id|#> [limit] [tools]\n" +
		"- /subagents info <id|#>\n" +
		"- /subagents send <id|#> <message>\n" +
		"- /subagents steer <id|#> <message>\n" +
		"- /subagents spawn <agentId> <task> [--model <model>] [--thinking <level>]\n" +
		"- /focus <subagent-label|session-key|session-id|session-label>\n" +
		"- /unfocus\n" +
		"- /session idle <duration|off>\n" +
		"- /session max-age <duration|off>\n" +
		"\n" +
		"Ids: use the list index (#), runId/session prefix, label, or full session key."
	subagentsKillUsage  = "Usage: /subagents kill <id|#|all>"
	subagentsInfoUsage  = "ℹ️ Usage: /subagents info <id|#>"
	subagentsLogUsage   = "📜 Usage: /subagents log <id|#> [limit]"
	subagentsSendUsage  = "Usage: /subagents send <id|#> <message>"
	subagentsSteerUsage = "Usage: /subagents steer <id|#> <message>"
	subagentsSpawnUsage = "Usage: /subagents spawn <agentId> <task> [--model <model>] [--thinking <level>]"
	subagentsListActive = "active subagents:"
	subagentsListRule   = "-----"
	subagentsListNone   = "(none)"
	subagentInfoHeader  = "ℹ️ Subagent info"
	subagentLogNone     = "(no messages)"
)

func subagentsListRecent(minutes int) string {
	return fmt.Sprintf("recent subagents (last %dm):", minutes)
}

// subagentTargetText is the command's wording of a target the subagents
// tool's resolver could not resolve: the command says "id" where the tool
// says "target".
func subagentTargetText(toolMsg string) string {
	switch {
	case toolMsg == errSubagentMissing:
		return "⚠️ Missing subagent id."
	case toolMsg == errSubagentUnknown:
		return "⚠️ Unknown subagent."
	case strings.HasPrefix(toolMsg, "Unknown subagent target: "):
		return "⚠️ Unknown subagent id: " + strings.TrimPrefix(toolMsg, "Unknown subagent target: ")
	case strings.HasPrefix(toolMsg, "Ambiguous subagent run id prefix: "):
		return "⚠️ Ambiguous run id prefix: " + strings.TrimPrefix(toolMsg, "Ambiguous subagent run id prefix: ")
	}
	return "⚠️ " + toolMsg
}

func shortRun(runID string) string {
	if len(runID) > 8 {
		return runID[:8]
	}
	return runID
}

func subagentSteeredText(label, runID string) string {
	return fmt.Sprintf("steered %s (run %s).", label, shortRun(runID))
}

func subagentSentText(label, runID string) string {
	return fmt.Sprintf("✅ Sent to %s (run %s).", label, shortRun(runID))
}

func subagentStillRunningText(runID string) string {
	return fmt.Sprintf("⏳ Subagent still running (run %s).", shortRun(runID))
}

func subagentErrorText(err, runID string) string {
	return fmt.Sprintf("⚠️ Subagent error: %s (run %s).", err, shortRun(runID))
}

func subagentSpawnedText(agentID, childKey, runID string) string {
	return fmt.Sprintf("Spawned subagent %s (session %s, run %s).", agentID, childKey, shortRun(runID))
}

func subagentLogHeader(label string) string { return "📜 Subagent log: " + label }

// /focus, /unfocus
const (
	focusUsage            = "Usage: /focus <subagent-label|session-key|session-id|session-label>"
	focusBindFailed       = "⚠️ Failed to bind this conversation to the target session."
	unfocusNotFocused     = "ℹ️ This conversation is not currently focused."
	unfocusDone           = "✅ Conversation unfocused."
	focusNoConversation   = "⚠️ /focus requires a direct-message conversation, or a thread or topic in a group."
	unfocusNoConversation = "⚠️ /unfocus requires a direct-message conversation, or a thread or topic in a group."
)

func focusUnresolved(token string) string { return "⚠️ Unable to resolve focus target: " + token }

func focusBound(key string) string {
	return fmt.Sprintf("✅ bound this conversation to %s (subagent).", key)
}

func bindingsUnavailable(channel string) string {
	return fmt.Sprintf("⚠️ %s conversation bindings are unavailable for this account.", channel)
}

// /session idle|max-age
const (
	sessionUsage          = "Usage: /session idle <duration|off> | /session max-age <duration|off> (example: /session idle 24h)"
	sessionNotBound       = "ℹ️ This conversation is not currently bound."
	sessionIdleDisabled   = "ℹ️ Idle timeout is currently disabled for this bound session."
	sessionMaxAgeDisabled = "ℹ️ Max age is currently disabled for this bound session."
	sessionIdleFailed     = "⚠️ Failed to update idle timeout for the current binding."
	sessionMaxAgeFailed   = "⚠️ Failed to update max age for the current binding."
)

// formatBindingDuration is OpenClaw's thread-binding duration label:
// whole hours as "<h>h", else minutes as "<m>m".
func formatBindingDuration(ms int64) string {
	switch {
	case ms <= 0:
		return "disabled"
	case ms < time.Minute.Milliseconds():
		return "<1m"
	}
	minutes := ms / time.Minute.Milliseconds()
	if minutes%60 == 0 {
		return fmt.Sprintf("%dh", minutes/60)
	}
	return fmt.Sprintf("%dm", minutes)
}

// formatExpiry is an expiry as OpenClaw prints it: ISO 8601 in UTC.
func formatExpiry(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func sessionIdleActive(ms, at int64) string {
	return fmt.Sprintf("ℹ️ Idle timeout active (%s, next auto-unbind at %s).", formatBindingDuration(ms), formatExpiry(at))
}

func sessionMaxAgeActive(ms, at int64) string {
	return fmt.Sprintf("ℹ️ Max age active (%s, hard auto-unbind at %s).", formatBindingDuration(ms), formatExpiry(at))
}

func sessionIdleOff(n int) string {
	return fmt.Sprintf("✅ Idle timeout disabled for %d %s.", n, plural(n, "binding", "bindings"))
}

func sessionMaxAgeOff(n int) string {
	return fmt.Sprintf("✅ Max age disabled for %d %s.", n, plural(n, "binding", "bindings"))
}

func sessionIdleSet(ms int64, n int, at int64) string {
	return fmt.Sprintf("✅ Idle timeout set to %s for %d %s (next auto-unbind at %s).", formatBindingDuration(ms), n, plural(n, "binding", "bindings"), formatExpiry(at))
}

func sessionMaxAgeSet(ms int64, n int, at int64) string {
	return fmt.Sprintf("✅ Max age set to %s for %d %s (hard auto-unbind at %s).", formatBindingDuration(ms), n, plural(n, "binding", "bindings"), formatExpiry(at))
}

// /context
const (
	contextHelpText = "🧠 /context\n" +
		"\n" +
		"What counts as context (high-level), plus a breakdown mode.\n" +
		"\n" +
		"Try:\n" +
		"- /context list   (short breakdown)\n" +
		"- /context detail (per-file + per-tool + per-skill + system prompt size)\n" +
		"- /context json   (same, machine-readable)\n" +
		"\n" +
		"Inline shortcut = a command token inside a normal message (e.g. “hey /status”). It runs immediately (allowlisted senders only) and is stripped before the model sees the remaining text."
	contextBreakdownHeader = "🧠 Context breakdown"
)

// contextUsageShort is OpenClaw's formatContextUsageShort:
// `Context <used>/<window> (<pct>%)`, `?` for what is unknown.
func contextUsageShort(total, window int64) string {
	used, win, pct := "?", "?", ""
	if total > 0 {
		used = formatTokens(total)
	}
	if window > 0 {
		win = formatTokens(window)
		if total > 0 {
			pct = fmt.Sprintf(" (%d%%)", min(999, (total*100+window/2)/window))
		}
	}
	return "Context " + used + "/" + win + pct
}

// /compact
const compactUnavailable = "⚙️ Compaction unavailable (missing session id)."

// /model
func modelSetText(ref string) string   { return "Model set to " + ref + "." }
func modelResetText(ref string) string { return "Model reset to default (" + ref + ")." }
func modelUnknownText(raw string) string {
	return fmt.Sprintf("Unrecognized model %q. Use /model to list available models.", raw)
}
func modelNotAllowedText(ref string) string {
	return fmt.Sprintf("Model %q is not allowed. Use /model to list available models.", ref)
}

// /think
const thinkDisabled = "Thinking disabled."

func thinkSetText(level string) string { return "Thinking level set to " + level + "." }
func thinkCurrentText(level string) string {
	return "Current thinking level: " + level + ".\nOptions: " + strings.Join(ThinkingLevels, ", ") + "."
}
func thinkUnknownText(raw string) string {
	return fmt.Sprintf("Unrecognized thinking level %q. Valid levels: %s.", raw, strings.Join(ThinkingLevels, ", "))
}
