package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// The raw NATS baselines: what one operation costs with nothing of
// sessionbus in the way, on the same server, in the same run.

func payload(n int) []byte { return bytes.Repeat([]byte("x"), n) }

// raw_request_reply: 128 B core request/reply, one responder on its own
// connection.
func runRawRequestReply(ctx context.Context, e *env) (Result, error) {
	rc, err := e.connectClient("bench raw responder")
	if err != nil {
		return Result{}, err
	}
	defer rc.Close()
	sub, err := rc.Subscribe(rawEchoSubj, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return Result{}, err
	}
	defer sub.Unsubscribe()
	if err := rc.Flush(); err != nil {
		return Result{}, err
	}
	data := payload(128)
	cctx, cancel := opCtx(ctx)
	defer cancel()
	r, err := measure(ctx, e.sz.fast, func() error {
		m, err := e.nc.RequestWithContext(cctx, rawEchoSubj, data)
		if err != nil {
			return err
		}
		if len(m.Data) != len(data) {
			return fmt.Errorf("echo returned %d bytes", len(m.Data))
		}
		return nil
	})
	r.Dataset = "128 B echo, 1 responder"
	return r, err
}

// raw_js_publish: 256 B synchronous JetStream publish (waits for the ack),
// file storage, R1.
func runRawJSPublish(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	if _, err := e.js.CreateStream(cctx, jetstream.StreamConfig{
		Name: rawStream, Subjects: []string{rawStreamSubj}, Storage: jetstream.FileStorage, Replicas: 1,
	}); err != nil {
		return Result{}, err
	}
	data := payload(256)
	r, err := measure(ctx, e.sz.fast, func() error {
		_, err := e.js.Publish(cctx, "bench.raw.js.a", data)
		return err
	})
	r.Dataset = "256 B, file R1"
	if err == nil {
		err = e.js.DeleteStream(cctx, rawStream)
	}
	return r, err
}

// raw_kv_get: KV get (a direct get) of 256 B values over 1,000 keys.
func runRawKVGet(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	kv, err := e.js.CreateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: rawBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		return Result{}, err
	}
	const nkeys = 1000
	keys := make([]string, nkeys)
	data := payload(256)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		if _, err := kv.Put(cctx, keys[i], data); err != nil {
			return Result{}, err
		}
	}
	i := 0
	r, err := measure(ctx, e.sz.fast, func() error {
		ke, err := kv.Get(cctx, keys[i%nkeys])
		i++
		if err != nil {
			return err
		}
		if len(ke.Value()) != len(data) {
			return errors.New("short value")
		}
		return nil
	})
	r.Dataset = "256 B values, 1000 keys, file"
	if err == nil {
		err = e.js.DeleteKeyValue(cctx, rawBucket)
	}
	return r, err
}

// raw_direct_get_50: 50 direct gets by known sequence, pipelined (all
// requests sent, then all replies read): the very 50 messages
// transcript_tail_interleaved returns, with no index and no checks.
func runRawDirectGet50(ctx context.Context, e *env) (Result, error) {
	in, err := e.ensureInterleaved(ctx)
	if err != nil {
		return Result{}, err
	}
	g, err := transcripts.NewRawDirectGetter(e.nc, e.tr.StreamName())
	if err != nil {
		return Result{}, err
	}
	defer g.Close()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	r, err := measure(ctx, e.sz.mid, func() error {
		n, err := g.Get(cctx, in.seqs)
		if err == nil && n == 0 {
			err = errors.New("direct gets returned no data")
		}
		return err
	})
	r.Dataset = in.dataset + ", the chosen session's newest 50"
	return r, err
}
