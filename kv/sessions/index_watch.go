package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// watch starts following the bucket and returns once every entry stored
// is applied.
func (ix *Index) watch(ctx context.Context) error {
	stream, err := ix.store.js.Stream(ctx, bus.KVStream(ix.store.KV().Bucket()))
	if err != nil {
		return fmt.Errorf("sessions bucket stream: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := ix.store.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("watch sessions bucket: %w", err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	go ix.follow(wctx, w, ready, done)
	ix.life.Lock()
	stopped := ix.stopped
	ix.stream, ix.cancel, ix.done = stream, cancel, done
	ix.life.Unlock()
	if stopped { // Stop ran while a recovery was starting this watch
		cancel()
		<-done
		return errors.New("session index stopped")
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}

// check looks at the bucket's stream every bus.CheckEvery: a deletion whose
// advisory this process missed (it was reconnecting, say) shows as a
// missing stream or one created after the one the index follows.
func (ix *Index) check() {
	defer ix.checks.Done()
	t := time.NewTicker(bus.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ix.life0.Done():
			return
		case <-t.C:
		}
		ix.life.Lock()
		followed := ix.stream.CachedInfo().Created
		ix.life.Unlock()
		ctx, cancel := context.WithTimeout(ix.life0, 5*time.Second)
		st, err := ix.store.js.Stream(ctx, bus.KVStream(ix.store.KV().Bucket()))
		cancel()
		if errors.Is(err, jetstream.ErrStreamNotFound) || (err == nil && !st.CachedInfo().Created.Equal(followed)) {
			ix.recover()
		}
	}
}

// recover runs when the server says the sessions bucket was deleted: the
// index empties (the entries are gone), the bucket is created again empty,
// and a new watch follows it from its start. Until that succeeds, Sync and
// WaitApplied fail with the reason and nothing is listed.
func (ix *Index) recover() {
	ix.recovering.Lock()
	defer ix.recovering.Unlock()
	bucket := ix.store.KV().Bucket()
	ix.log.Error("session index: the sessions bucket was deleted; every session entry is gone; recreating it empty", "bucket", bucket)
	ix.stopWatch()
	ix.mu.Lock()
	ix.clear()
	ix.err = fmt.Errorf("the sessions bucket %s was deleted and is being recreated", bucket)
	ix.changed.Broadcast()
	ix.mu.Unlock()
	ix.life.Lock()
	stopped := ix.stopped
	ix.life.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(ix.life0, 30*time.Second)
	defer cancel()
	err := bus.AfterDeletion(ctx, func() error { return ix.store.recreate(ctx) })
	if err == nil {
		ix.mu.Lock()
		ix.err = nil
		ix.mu.Unlock()
		err = ix.watch(ctx)
	}
	if err != nil {
		ix.log.Error("session index: recreating the sessions bucket failed; restart the worker once the server is healthy", "bucket", bucket, "err", err)
		ix.mu.Lock()
		ix.err = fmt.Errorf("the sessions bucket %s was deleted and could not be recreated: %w", bucket, err)
		ix.changed.Broadcast()
		ix.mu.Unlock()
	}
}

// stopWatch ends the current watch and waits for its goroutine.
func (ix *Index) stopWatch() {
	ix.life.Lock()
	cancel, done := ix.cancel, ix.done
	ix.life.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// follow applies the watch's changes until it ends, then fails the waiters
// of Sync and WaitApplied.
func (ix *Index) follow(ctx context.Context, w jetstream.KeyWatcher, ready, done chan struct{}) {
	defer close(done)
	if ix.load(ctx, w.Updates()) {
		close(ready)
		ix.buildSearch()
		record.Follow(ctx, w, nil, ix.apply)
	} else {
		_ = w.Stop()
		close(ready)
	}
	ix.mu.Lock()
	if ix.err == nil {
		ix.err = errors.New("session index stopped")
	}
	ix.changed.Broadcast()
	ix.mu.Unlock()
}

// Stop ends the watch.
func (ix *Index) Stop() {
	ix.life.Lock()
	ix.stopped = true
	sub := ix.deleted
	ix.life.Unlock()
	ix.end()
	ix.checks.Wait()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	ix.stopWatch()
}
