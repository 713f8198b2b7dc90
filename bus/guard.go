package bus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	nc   *nats.Conn
	log  *slog.Logger
	mu   sync.Mutex
	subs []*nats.Subscription
}

// NewGuard returns a guard that subscribes on nc.
func NewGuard(nc *nats.Conn, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.Default()
	}
	return &Guard{nc: nc, log: log}
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
		g.mu.Unlock()
	}
	return nil
}

func (g *Guard) recreate(r Recreatable, name string) {
	g.log.Error("stream deleted under a running process: its data is gone; recreating it empty", "stream", name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Recreate(ctx, name); err != nil {
		g.log.Error("recreating a deleted stream failed; calls that need it fail until it exists again", "stream", name, "err", err)
	}
}

// Stop ends every subscription.
func (g *Guard) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.subs {
		_ = s.Unsubscribe()
	}
	g.subs = nil
}
