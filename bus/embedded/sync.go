package embedded

import (
	"fmt"
	"strings"
	"time"
)

// Sync is when the JetStream file store flushes its writes to disk.
//
// The zero value, AlwaysSync, flushes each write before acknowledging it:
// an embedded server is a single node with no replica to recover from, and
// nats-server's lazy default (a flush every two minutes) loses
// acknowledged writes when the machine crashes or loses power (Jepsen's
// NATS 2.12.1 analysis). A positive Interval is that lazy mode: faster,
// safe against a process kill, not against an OS crash.
type Sync struct {
	// Interval between flushes; 0 flushes every write (sync_interval: always).
	Interval time.Duration
}

// AlwaysSync flushes every write before it is acknowledged (the default).
var AlwaysSync = Sync{}

// LazySync is nats-server's own default: a flush every two minutes.
var LazySync = Sync{Interval: 2 * time.Minute}

// ParseSync reads a --sync value: "always", or a duration such as "2m".
func ParseSync(s string) (Sync, error) {
	if strings.EqualFold(strings.TrimSpace(s), "always") {
		return AlwaysSync, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return Sync{}, fmt.Errorf("--sync %q: want \"always\" (flush every write, the default) or a positive duration such as 2m (nats-server's lazy default)", s)
	}
	return Sync{Interval: d}, nil
}

// Always reports whether every write is flushed before it is acknowledged.
func (s Sync) Always() bool { return s.Interval <= 0 }

// String is the --sync value that selects s.
func (s Sync) String() string {
	if s.Always() {
		return "always"
	}
	return s.Interval.String()
}

// Describe says what s guarantees, for the start-up line.
func (s Sync) Describe() string {
	if s.Always() {
		return "every write is flushed to disk before it is acknowledged (survives an OS crash or power loss)"
	}
	return fmt.Sprintf("writes are flushed every %v: an OS crash or power loss can lose acknowledged writes of the last %v (pass --sync always to flush every write)", s.Interval, s.Interval)
}
