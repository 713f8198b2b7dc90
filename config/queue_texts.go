package config

import "fmt"

// OpenClaw's words for the queue and for steering, in one place: the chat
// replies of /queue, /steer and /tell, the result a skipped tool call gets
// and the prompt of a gathered (collect) turn. Tests compare against
// these, and docs/inbound.md quotes them.
const (
	// SteerUsage answers /steer (or /tell) without a message.
	SteerUsage = "Usage: /steer <message>"
	// SteeredText answers /steer when the message went into the running turn.
	SteeredText = "steered current session."
	// SkippedToolText is the result of a tool call the model asked for
	// that had not started when a steered message came: it did not run.
	SkippedToolText = "Skipped to process an incoming message."
	// CollectHeader starts the prompt of a turn gathered in collect mode;
	// each message follows as "---\nQueued #N\n<text>".
	CollectHeader = "[Queued messages while agent was busy]"
	// queueOptions lists /queue's words after its status line.
	queueOptions = "modes steer, followup, collect, steer+backlog, interrupt; debounce:<ms|s|m>, cap:<n>, drop:old|new|summarize"
	// systemMark starts OpenClaw's acknowledgement of a setting.
	systemMark = "⚙️ "
	// QueueResetText acknowledges /queue reset (or default).
	QueueResetText = systemMark + "Queue mode reset to default."
)

// QueueModeSetText acknowledges /queue <mode>.
func QueueModeSetText(mode string) string { return systemMark + "Queue mode set to " + mode + "." }

// QueueDebounceSetText, QueueCapSetText and QueueDropSetText acknowledge
// /queue's options.
func QueueDebounceSetText(ms int64) string {
	return fmt.Sprintf("%sQueue debounce set to %dms.", systemMark, ms)
}

// QueueCapSetText acknowledges /queue cap:N.
func QueueCapSetText(n int64) string { return fmt.Sprintf("%sQueue cap set to %d.", systemMark, n) }

// QueueDropSetText acknowledges /queue drop:POLICY.
func QueueDropSetText(d string) string { return systemMark + "Queue drop set to " + d + "." }

// QueueStatusText answers a bare /queue with the session's settings.
func QueueStatusText(s QueueSettings) string {
	return fmt.Sprintf("Current queue settings: mode=%s, debounce=%dms, cap=%d, drop=%s.\nOptions: %s.", s.Mode, s.DebounceMs, s.Cap, s.Drop, queueOptions)
}

// UnknownQueueModeText refuses a /queue word that is no mode.
func UnknownQueueModeText(raw string) string {
	return fmt.Sprintf("Unrecognized queue mode %q. Valid modes: steer, followup, collect, steer+backlog, interrupt.", raw)
}

// InvalidDebounceText, InvalidCapText and InvalidDropText refuse a /queue
// option's value.
func InvalidDebounceText(raw string) string {
	return fmt.Sprintf("Invalid debounce %q. Use ms/s/m (e.g. debounce:1500ms, debounce:2s).", raw)
}

// InvalidCapText refuses a cap that is no positive integer.
func InvalidCapText(raw string) string {
	return fmt.Sprintf("Invalid cap %q. Use a positive integer (e.g. cap:10).", raw)
}

// InvalidDropText refuses a drop policy that is none.
func InvalidDropText(raw string) string {
	return fmt.Sprintf("Invalid drop policy %q. Use drop:old, drop:new, or drop:summarize.", raw)
}

// QueueOverflowText heads the lines of the messages a full collect batch
// dropped (drop: summarize).
func QueueOverflowText(n int) string {
	noun := "messages"
	if n == 1 {
		noun = "message"
	}
	return fmt.Sprintf("[Queue overflow] Dropped %d %s due to cap.", n, noun)
}
