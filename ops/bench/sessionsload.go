package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// The list benchmarks' inventory is loaded in JetStream atomic batches
// straight to the bucket's KV subjects. With --sync always a plain publish
// costs the server one fsync per entry (~1,300-3,500 a second here, 5-12
// minutes for a million); a single-node server commits an atomic batch
// with one fsync for all its messages (nats-server 2.12+), so the load
// costs one fsync per loadBatch entries and is bound by JSON and the
// server's per-message work instead. The bucket's stream gets
// allow_atomic for it (a flag that only permits batches; the tools write
// as before).
const (
	loadBatch    = 1000 // entries per atomic batch: the server's default maximum
	loadInflight = 8    // batches in flight (the server allows 50 per stream)
)

// loadSessions writes sessions [from, n) of the inventory.
func (e *env) loadSessions(ctx context.Context, from, n int) error {
	stream, err := e.js.Stream(ctx, bus.KVStream(e.names.SessionsBucket()))
	if err != nil {
		return err
	}
	if cfg := stream.CachedInfo().Config; !cfg.AllowAtomicPublish {
		cfg.AllowAtomicPublish = true
		if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("allow atomic batches on the sessions bucket: %w", err)
		}
	}
	prefix := "$KV." + e.names.SessionsBucket() + "."
	batches := make(chan [2]int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range loadInflight {
		wg.Go(func() {
			for b := range batches {
				if err := e.publishSessionBatch(cctx, prefix, b[0], b[1]); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		})
	}
	for i := from; i < n && cctx.Err() == nil; i += loadBatch {
		select {
		case batches <- [2]int{i, min(i+loadBatch, n)}:
		case <-cctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// publishSessionBatch publishes inventory entries [from, to) as one atomic
// batch and waits for its acknowledgement (the commit's).
func (e *env) publishSessionBatch(ctx context.Context, prefix string, from, to int) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	now := e.loadNow
	for i := from; i < to; i++ {
		ent := listEntry(i, now)
		data, err := json.Marshal(ent)
		if err != nil {
			return err
		}
		m := &nats.Msg{Subject: prefix + bus.EncodeKey(ent.Key), Data: data, Header: nats.Header{
			"Nats-Batch-Id": {id}, "Nats-Batch-Sequence": {strconv.Itoa(i - from + 1)}}}
		if i == to-1 {
			m.Header["Nats-Batch-Commit"] = []string{"1"}
			reply, err := e.nc.RequestMsgWithContext(ctx, m)
			if err != nil {
				return fmt.Errorf("commit of sessions %d-%d: %w", from, to-1, err)
			}
			var ack struct {
				Count int `json:"count"`
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(reply.Data, &ack); err != nil {
				return fmt.Errorf("commit of sessions %d-%d: %w: %s", from, to-1, err, reply.Data)
			}
			if ack.Error != nil || ack.Count != to-from {
				return fmt.Errorf("commit of sessions %d-%d: %s", from, to-1, reply.Data)
			}
			return nil
		}
		if err := e.nc.PublishMsg(m); err != nil {
			return err
		}
	}
	return errors.New("empty batch")
}
