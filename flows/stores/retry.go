package stores

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// step opens one store.
type step struct {
	what string
	open func(context.Context) error
}

// attemptWithin bounds one try at opening a store. Right after a cluster
// (re)starts, a stream whose replicas are still electing a leader leaves
// its info request unanswered until the caller gives up: one such request
// must not use up the whole start-up bound the caller's context gives.
const attemptWithin = 4 * time.Second

// retryWait is the first pause between two tries; it doubles up to
// retryWaitMax.
const (
	retryWait    = 250 * time.Millisecond
	retryWaitMax = 2 * time.Second
)

// RetryTransient calls open until it succeeds, fails for good (an error a
// retry cannot clear: a bad config, a permission), or ctx ends; then its
// last error is returned, so the caller's message says what did not open.
func RetryTransient(ctx context.Context, log *slog.Logger, what string, open func(context.Context) error) error {
	wait := retryWait
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, attemptWithin)
		err := open(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !Transient(err) {
			return err
		}
		log.Warn("store not ready yet, retrying", "store", what, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, retryWaitMax)
	}
}

// Transient reports an error a JetStream cluster gives while it settles,
// which a later try clears: no answer in time (a stream without a leader
// yet), no responders (JetStream not up on the node yet, which the client
// reports as not enabled), a 503 (JetStream or the cluster temporarily
// unavailable), or the connection between two servers.
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code == 503 {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrConnectionReconnecting)
}
