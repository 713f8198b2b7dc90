package bus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Recreatable is a stream or bucket a process works on that it can create
// again, as it did when it opened it.
type Recreatable interface {
	// Streams names the JetStream streams it lives in (a bucket's is KV_<bucket>).
	Streams() []string
	// Recreate makes it usable again after deleted, one of Streams, was
	// deleted: create it as Open did and drop whatever state was derived
	// from the old one.
	Recreate(ctx context.Context, deleted string) error
}

// Guard recreates the streams and buckets a worker or gateway opened when
// an operator deletes one under it (`nats stream rm`, `nats kv del`). Without
// it, publishes to the object fail until a restart, and a watch or consumer
// on it goes quiet while the state built from it goes stale.
type Guard struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	log    *slog.Logger
	ctx    context.Context // ended by Stop, so no recreation outlives it
	cancel context.CancelFunc
	mu     sync.Mutex
	subs   []*nats.Subscription
	// busy holds the streams being recreated, so the advisory and the
	// check never recreate one twice at once.
	busy    map[string]bool
	watched []watched
	wg      sync.WaitGroup
}

type watched struct {
	r    Recreatable
	name string
}

// CheckEvery is how often a guard also looks for its streams itself: an
// advisory is a core NATS message, and one lost (a reconnect, a slow
// subscriber) must not leave a stream deleted until a restart.
const CheckEvery = 5 * time.Second

// NewGuard returns a guard that subscribes on js's connection.
func NewGuard(js jetstream.JetStream, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Guard{nc: js.Conn(), js: js, log: log, ctx: ctx, cancel: cancel, busy: map[string]bool{}}
	g.wg.Add(1)
	go g.check()
	return g
}

// check looks for every watched stream each CheckEvery, with one listing
// of the account's stream names rather than a stream info per stream: an
// idle worker's guard watches over a dozen streams, and on a host of many
// tenants those requests were most of the JetStream API traffic the
// cluster served while nothing happened.
func (g *Guard) check() {
	defer g.wg.Done()
	t := time.NewTicker(CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		ws := append([]watched(nil), g.watched...)
		g.mu.Unlock()
		if len(ws) == 0 {
			continue
		}
		have, err := g.streamNames()
		if err != nil {
			continue // the server is away: the next tick looks again
		}
		for _, w := range ws {
			if !have[w.name] {
				g.recreate(w.r, w.name)
			}
		}
	}
}

// streamNames lists the account's streams; an error means the listing is
// incomplete, and nothing is recreated on it.
func (g *Guard) streamNames() (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(g.ctx, 5*time.Second)
	defer cancel()
	l := g.js.StreamNames(ctx)
	have := map[string]bool{}
	for n := range l.Name() {
		have[n] = true
	}
	return have, l.Err()
}

// Watch follows the deletion of every stream of r.
func (g *Guard) Watch(r Recreatable) error {
	for _, name := range r.Streams() {
		sub, err := OnStreamDeleted(g.nc, name, func() { g.recreate(r, name) })
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.subs = append(g.subs, sub)
		g.watched = append(g.watched, watched{r, name})
		g.mu.Unlock()
	}
	return nil
}

func (g *Guard) recreate(r Recreatable, name string) {
	g.mu.Lock()
	if g.busy[name] {
		g.mu.Unlock()
		return
	}
	g.busy[name] = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.busy, name)
		g.mu.Unlock()
	}()
	g.log.Error("stream deleted under a running process: its data is gone; recreating it empty", "stream", name)
	ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
	defer cancel()
	attempt := 0
	recreate := func() error {
		err := r.Recreate(ctx, name)
		attempt++
		if err != nil && ctx.Err() == nil {
			// the first attempts may fail while the server still removes
			// the old stream; one that goes on failing says here at
			// which step (the stream, or what is bound to it)
			g.log.Warn("recreating a deleted stream: an attempt failed; trying again", "stream", name, "attempt", attempt, "err", err)
		}
		return err
	}
	if err := AfterDeletion(ctx, recreate); err != nil && g.ctx.Err() == nil {
		g.log.Error("recreating a deleted stream failed; calls that need it fail until it exists again", "stream", name, "err", err)
	}
}

// Retry calls fn until it succeeds or ctx ends, waiting longer after each
// failure (50 ms doubling, at most 2 s). Recreating a stream right after the
// advisory of its deletion fails for a moment ("error creating store for
// stream") while the server is still removing the old one.
func Retry(ctx context.Context, fn func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if Sleep(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Sleep waits d, or until ctx ends: then it returns ctx.Err(). The wait of
// every backoff and retry loop.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DeletionGrace is how long a process waits after a stream's deletion is
// announced before it creates the stream again. The server announces the
// deletion before it has removed the stream's files, and a stream created
// at once was measured to fail (10049) or, rarely, to come back holding the
// deleted messages.
const DeletionGrace = 500 * time.Millisecond

// AfterDeletion waits DeletionGrace, then calls fn until it succeeds or ctx
// ends (see Retry).
func AfterDeletion(ctx context.Context, fn func() error) error {
	if err := Sleep(ctx, DeletionGrace); err != nil {
		return err
	}
	return Retry(ctx, fn)
}

// Stop ends every subscription.
func (g *Guard) Stop() {
	g.cancel()
	g.mu.Lock()
	for _, s := range g.subs {
		_ = s.Unsubscribe()
	}
	g.subs = nil
	g.mu.Unlock()
	g.wg.Wait()
}
