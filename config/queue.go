package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Messages is OpenClaw's `messages` section, of which sessionbus reads
// the queue: what a human message does while its session runs a turn.
type Messages struct {
	Queue MessagesQueue `mapstructure:"queue"`
}

// MessagesQueue is `messages.queue` (docs/config.md). Mode, cap and drop
// are global or per session (/queue); mode and debounce also per channel.
type MessagesQueue struct {
	// Mode is the default queue mode (QueueModes; default steer).
	Mode string `mapstructure:"mode"`
	// ByChannel overrides Mode per channel (e.g. discord: collect).
	ByChannel map[string]string `mapstructure:"byChannel"`
	// DebounceMs is the quiet window before a collect batch runs
	// (default 500).
	DebounceMs int `mapstructure:"debounceMs"`
	// DebounceMsByChannel overrides DebounceMs per channel.
	DebounceMsByChannel map[string]int `mapstructure:"debounceMsByChannel"`
	// Cap bounds the messages one queue holds (default 20): a collect
	// batch, or the messages steered into one running turn.
	Cap int `mapstructure:"cap"`
	// Drop is what a full queue does (QueueDrops; default summarize).
	Drop string `mapstructure:"drop"`
}

// Queue modes (OpenClaw's /queue modes). Steer is the default.
const (
	QueueSteer        = "steer"         // inject into the running turn at its next boundary
	QueueQueue        = "queue"         // legacy steer: one message per boundary
	QueueSteerBacklog = "steer-backlog" // steer, and keep the message for a follow-up turn
	QueueFollowup     = "followup"      // a turn of its own after the running one
	QueueCollect      = "collect"       // one turn for every message of the quiet window
	QueueInterrupt    = "interrupt"     // stop the running turn, run the newest message
)

// Queue drop policies: what a full queue does with one more message.
const (
	DropOld       = "old"       // drop the oldest message
	DropNew       = "new"       // refuse the newest
	DropSummarize = "summarize" // drop the oldest, keep a line of it in the prompt
)

// Defaults of messages.queue (OpenClaw's).
const (
	DefaultQueueMode       = QueueSteer
	DefaultQueueDebounceMs = 500
	DefaultQueueCap        = 20
	DefaultQueueDrop       = DropSummarize
)

// NormalizeQueueMode reads a queue mode as OpenClaw's /queue does, with
// its aliases; ok is false for a word that is none.
func NormalizeQueueMode(raw string) (mode string, ok bool) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "steer", "steering":
		return QueueSteer, true
	case "queue", "queued":
		return QueueQueue, true
	case "steer+backlog", "steer-backlog", "steer_backlog":
		return QueueSteerBacklog, true
	case "followup", "follow-ups", "followups":
		return QueueFollowup, true
	case "collect", "coalesce":
		return QueueCollect, true
	case "interrupt", "interrupts", "abort":
		return QueueInterrupt, true
	}
	return "", false
}

// NormalizeQueueDrop reads a drop policy with OpenClaw's aliases.
func NormalizeQueueDrop(raw string) (drop string, ok bool) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "old", "oldest":
		return DropOld, true
	case "new", "newest":
		return DropNew, true
	case "summarize", "summary":
		return DropSummarize, true
	}
	return "", false
}

// ParseQueueDebounce reads a /queue debounce: a bare number is
// milliseconds; units ms, s, m, h and d are accepted.
func ParseQueueDebounce(raw string) (ms int64, ok bool) {
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return int64(n), n >= 0
	}
	unit := time.Millisecond
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}} {
		if num, cut := strings.CutSuffix(s, u.suffix); cut {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil || n < 0 {
				return 0, false
			}
			unit = u.d
			return int64(n * float64(unit) / float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// QueueSettings is the queue a session's messages go through: its mode,
// debounce, cap and drop, resolved from the session's /queue override,
// the channel's and the global config, then OpenClaw's defaults.
type QueueSettings struct {
	Mode       string
	DebounceMs int64
	Cap        int
	Drop       string
}

// QueueOverride is a session's /queue override (its entry's queueMode,
// queueDebounceMs, queueCap and queueDrop; zero values: none).
type QueueOverride struct {
	Mode       string
	DebounceMs *int64
	Cap        int64
	Drop       string
}

// QueueFor resolves the queue of a session on channel, with the session's
// override o, in OpenClaw's precedence: the session's /queue, then
// messages.queue.byChannel, then messages.queue.mode, then steer.
func (c *Config) QueueFor(channel string, o QueueOverride) QueueSettings {
	q := c.Messages.Queue
	s := QueueSettings{Mode: DefaultQueueMode, DebounceMs: DefaultQueueDebounceMs, Cap: DefaultQueueCap, Drop: DefaultQueueDrop}
	if m, ok := NormalizeQueueMode(q.Mode); ok {
		s.Mode = m
	}
	if m, ok := NormalizeQueueMode(q.ByChannel[strings.ToLower(channel)]); ok && channel != "" {
		s.Mode = m
	}
	if m, ok := NormalizeQueueMode(o.Mode); ok {
		s.Mode = m
	}
	s.DebounceMs = int64(max(q.DebounceMs, 0)) // 0: none
	if d, ok := q.DebounceMsByChannel[strings.ToLower(channel)]; ok && channel != "" && d >= 0 {
		s.DebounceMs = int64(d)
	}
	if o.DebounceMs != nil && *o.DebounceMs >= 0 {
		s.DebounceMs = *o.DebounceMs
	}
	if q.Cap > 0 {
		s.Cap = q.Cap
	}
	if o.Cap > 0 {
		s.Cap = int(o.Cap)
	}
	if d, ok := NormalizeQueueDrop(q.Drop); ok {
		s.Drop = d
	}
	if d, ok := NormalizeQueueDrop(o.Drop); ok {
		s.Drop = d
	}
	return s
}

// validateQueue refuses a messages.queue a human would be surprised by:
// a mode or drop policy that is none (OpenClaw's schema refuses them),
// a negative debounce or cap.
func (c *Config) validateQueue() error {
	q := &c.Messages.Queue
	if q.Mode != "" {
		m, ok := NormalizeQueueMode(q.Mode)
		if !ok {
			return fmt.Errorf("messages.queue.mode %q is not a queue mode: use steer, followup, collect, steer-backlog, interrupt or queue", q.Mode)
		}
		q.Mode = m
	}
	for ch, mode := range q.ByChannel {
		m, ok := NormalizeQueueMode(mode)
		if !ok {
			return fmt.Errorf("messages.queue.byChannel.%s %q is not a queue mode: use steer, followup, collect, steer-backlog, interrupt or queue", ch, mode)
		}
		q.ByChannel[ch] = m
	}
	if q.Drop != "" {
		d, ok := NormalizeQueueDrop(q.Drop)
		if !ok {
			return fmt.Errorf("messages.queue.drop %q must be old, new or summarize", q.Drop)
		}
		q.Drop = d
	}
	if q.DebounceMs < 0 {
		return fmt.Errorf("messages.queue.debounceMs must be 0 or more milliseconds, got %d", q.DebounceMs)
	}
	for ch, d := range q.DebounceMsByChannel {
		if d < 0 {
			return fmt.Errorf("messages.queue.debounceMsByChannel.%s must be 0 or more milliseconds, got %d", ch, d)
		}
	}
	if q.Cap < 1 {
		return fmt.Errorf("messages.queue.cap must be 1 or more, got %d", q.Cap)
	}
	return nil
}

// Steerable reports whether a running turn of agentID can take messages
// steered into it: the openai runtime asks the model again after each
// round of tool calls, where they go in. A script or exec turn cannot
// (OpenClaw's fallback then: the message waits for a turn of its own).
func (c *Config) Steerable(agentID string) bool {
	for _, a := range c.Agents.List {
		if a.ID == agentID {
			return strings.EqualFold(strings.TrimSpace(a.Runtime), "openai")
		}
	}
	return false
}
