package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// A collect run (messages.queue collect) is queued by the worker that
// takes the first human message of a busy session, with that message in
// its record's Inbox; the messages that follow while it waits join the
// same record. It starts once the session is free and no message came
// for its quiet window, and its prompt is the batch, frozen by the write
// that records it running (workers add to a waiting record only).

// errQuiet is errBusy for a collect run whose quiet window is not over:
// the delivery tries again when it is.
type errQuiet struct{ wait time.Duration }

func (e errQuiet) Error() string {
	return fmt.Sprintf("%v: a collect batch waits %v more for its quiet window", errBusy, e.wait)
}

func (e errQuiet) Unwrap() error { return errBusy }

// quietLeft is how long the collect run rec still waits for its quiet
// window (0: none).
func quietLeft(rec *runs.Record, now time.Time) time.Duration {
	if !rec.Collect || rec.QuietMs <= 0 || len(rec.Inbox) == 0 {
		return 0
	}
	last := rec.Inbox[len(rec.Inbox)-1].At
	return max(time.UnixMilli(last+rec.QuietMs).Sub(now), 0)
}

// busyDelay is the wait before a run that found its session busy tries
// again: a collect run's quiet window, else laneRetryDelay.
func busyDelay(err error, lane time.Duration) time.Duration {
	var q errQuiet
	if errors.As(err, &q) {
		return max(q.wait, time.Millisecond)
	}
	return lane
}

// collectPrompt is a collect run's prompt, as OpenClaw words a batch of
// queued messages: what a full batch dropped first, then each message.
func collectPrompt(rec *runs.Record) string {
	var b strings.Builder
	b.WriteString(config.CollectHeader)
	if rec.InboxDropped > 0 {
		b.WriteString("\n\n" + config.QueueOverflowText(rec.InboxDropped) + "\nSummary:")
		for _, l := range rec.InboxSummary {
			b.WriteString("\n- " + l)
		}
	}
	n := 0
	for _, m := range rec.Inbox {
		if m.Mode != config.QueueCollect {
			continue
		}
		n++
		fmt.Fprintf(&b, "\n\n---\nQueued #%d\n%s", n, m.Text)
	}
	return b.String()
}
