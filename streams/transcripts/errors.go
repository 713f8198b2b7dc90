package transcripts

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
)

// Errors returned by the transcript store. They are sentinels: callers test
// them with errors.Is; the returned error wraps one of them with the session
// key, entry number and stream sequence involved.
var (
	// ErrInvalidKey: the encoded session key is not a valid subject/KV key
	// (empty, too long, wildcard, bad byte, leading/trailing/double dot).
	ErrInvalidKey = errors.New("streams: invalid encoded session key")
	// ErrEmptyEntry: Append got no entries or an empty entry body.
	ErrEmptyEntry = errors.New("streams: empty transcript entry")
	// ErrEntryTooLarge: an entry is bigger than the configured maximum.
	ErrEntryTooLarge = errors.New("streams: transcript entry too large")
	// ErrConflict: an append lost the compare-and-set race too many times in a row.
	ErrConflict = errors.New("streams: transcript append conflict: too many concurrent writers, retries exhausted")
	// ErrEntryMissing: the index names a stream message that no longer exists
	// (deleted or purged out of band, e.g. `nats stream rmm` or a limit).
	ErrEntryMissing = errors.New("streams: transcript entry missing from the stream (deleted or purged)")
	// ErrIndexCorrupt: the index or the Sb-Entry/Sb-Prev chain does not match
	// the stream (a record that is unreadable or points at a foreign message).
	ErrIndexCorrupt = errors.New("streams: transcript index does not match the stream")
	// ErrUnavailable: JetStream did not answer (no responders: stream or bucket missing, server down).
	ErrUnavailable = errors.New("streams: jetstream unavailable (no responders)")
	// ErrClosed: the Store handle was closed.
	ErrClosed = errors.New("streams: transcripts closed")
)

// Transient reports whether err is one a retry can clear: JetStream not
// answering (no responders, a stream without a leader while one is
// elected, a wave of requests that timed out) or a compare-and-set lost
// too many times to concurrent writers. A caller serving a client answers
// these with a retryable "unavailable" rather than a failure.
func Transient(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrConflict) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrConnectionReconnecting)
}
