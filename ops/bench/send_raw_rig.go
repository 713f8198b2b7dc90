package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawRig is what the raw send rows (raw_send_chain* and
// raw_send_concurrent*) share: their streams and KV buckets, their
// connections, the worker that turns a caller's request into a run request
// and answers it on the outcome, and the gateways' pull loop. The rows
// differ only in how their gateways lay a run's writes out, so one copy of
// the rest keeps a difference between their figures a difference of shape.
type rawRig struct {
	js      jetstream.JetStream
	prefix  string   // the KV buckets' name prefix
	buckets []string // the KV buckets, without the prefix
	conns   []*nats.Conn
	stop    []func() // run last first by close
	streams []string // every stream a row writes, the buckets' included
	gwErr   atomic.Pointer[error]
	running sync.WaitGroup // runs whose writes are not all done
}

// setUp creates the row's streams and buckets (file storage, as the send
// path's) and one internal connection per name. On an error what was made
// is left for close.
func (r *rawRig) setUp(ctx context.Context, e *env, streams []jetstream.StreamConfig, prefix string, buckets []string, conns ...string) error {
	r.js, r.prefix, r.buckets = e.js, prefix, buckets
	for _, cfg := range streams {
		cfg.Storage = jetstream.FileStorage
		if _, err := e.js.CreateStream(ctx, cfg); err != nil {
			return err
		}
		r.streams = append(r.streams, cfg.Name)
	}
	for _, b := range buckets {
		if _, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: prefix + b, History: 1, Storage: jetstream.FileStorage}); err != nil {
			return err
		}
		r.streams = append(r.streams, "KV_"+prefix+b)
	}
	for _, name := range conns {
		nc, err := e.connectInternal(name)
		if err != nil {
			return err
		}
		r.conns = append(r.conns, nc)
	}
	return nil
}

// rawKV is the buckets of a raw send row; those a row has no bucket for
// stay nil.
type rawKV struct {
	lanes, runs, sessions, index, outcomes jetstream.KeyValue
}

func (kv *rawKV) bucket(name string) (*jetstream.KeyValue, error) {
	switch name {
	case "lanes":
		return &kv.lanes, nil
	case "runs":
		return &kv.runs, nil
	case "sessions":
		return &kv.sessions, nil
	case "index":
		return &kv.index, nil
	case "outcomes":
		return &kv.outcomes, nil
	}
	return nil, fmt.Errorf("no bucket %q in a raw send row", name)
}

// openKV opens the row's buckets for one party's connection, as each
// party of a deployment opens its own.
func (r *rawRig) openKV(ctx context.Context, nc *nats.Conn) (js jetstream.JetStream, kv rawKV, err error) {
	if js, err = jetstream.New(nc); err != nil {
		return nil, kv, err
	}
	for _, b := range r.buckets {
		p, err := kv.bucket(b)
		if err != nil {
			return nil, kv, err
		}
		if *p, err = js.KeyValue(ctx, r.prefix+b); err != nil {
			return nil, kv, err
		}
	}
	return js, kv, nil
}

// rawWorker is the worker side of a raw send row.
type rawWorker struct {
	reqSub  string // callers' requests: "[session ]<run id>"
	runsSub string // the run requests: the caller's request, then the body
	// answerOn are the buckets whose "ok" outcome for a run answers its
	// caller; follow are watched and drained only (the worker's session
	// index).
	answerOn, follow []string
}

// startWorker publishes each caller's request as a run request (deduplicated
// on its run id, as the worker's are) and answers the caller "ok <id>" once
// the run's outcome shows up on a watch.
func (r *rawRig) startWorker(ctx context.Context, nc *nats.Conn, w rawWorker) error {
	js, kv, err := r.openKV(ctx, nc)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = append(r.stop, cancel)
	var waiters sync.Map // run id -> chan struct{}
	watch := func(name string, answer bool) error {
		b, err := kv.bucket(name)
		if err != nil {
			return err
		}
		ups, err := (*b).WatchAll(wctx, jetstream.UpdatesOnly())
		if err != nil {
			return err
		}
		go func() {
			for e := range ups.Updates() {
				if !answer || e == nil || !bytes.Contains(e.Value(), []byte(`"status":"ok"`)) {
					continue
				}
				if ch, ok := waiters.Load(e.Key()); ok {
					ch.(chan struct{}) <- struct{}{}
				}
			}
		}()
		return nil
	}
	for _, b := range w.answerOn {
		if err := watch(b, true); err != nil {
			return err
		}
	}
	for _, b := range w.follow {
		if err := watch(b, false); err != nil {
			return err
		}
	}
	runBody := payload(700)
	sub, err := nc.Subscribe(w.reqSub, func(m *nats.Msg) {
		go func() {
			req := string(m.Data)
			id := req[strings.LastIndexByte(req, ' ')+1:]
			ch := make(chan struct{}, 1)
			waiters.Store(id, ch)
			defer waiters.Delete(id)
			msg := &nats.Msg{Subject: w.runsSub, Data: append([]byte(req+" "), runBody...)}
			if _, err := js.PublishMsg(wctx, msg, jetstream.WithMsgID(id)); err != nil {
				return
			}
			select {
			case <-ch:
				_ = m.Respond([]byte("ok " + id))
			case <-wctx.Done():
			}
		}()
	})
	if err != nil {
		return err
	}
	r.stop = append(r.stop, func() { _ = sub.Unsubscribe() })
	return nc.Flush()
}

// pull hands each run request on the stream's durable consumer (shared by
// every gateway that pulls with the same name) to run, each on a goroutine
// of its own, and acks it once run has made all its writes. A failed run
// is kept for gatewayErr and not acked: nothing here redelivers, so its
// caller times out.
func (r *rawRig) pull(ctx context.Context, js jetstream.JetStream, stream, durable string, run func(data []byte) error) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	iter, err := cons.Messages()
	if err != nil {
		return err
	}
	r.stop = append(r.stop, iter.Stop)
	go func() {
		for {
			msg, err := iter.Next()
			if err != nil {
				return
			}
			r.running.Add(1)
			go func() {
				defer r.running.Done()
				if err := run(msg.Data()); err != nil {
					r.gwErr.Store(&err)
					return
				}
				_ = msg.Ack()
			}()
		}
	}()
	return nil
}

func (r *rawRig) gatewayErr() error {
	if p := r.gwErr.Load(); p != nil {
		return *p
	}
	return nil
}

// wait waits for every run's last wave (the writes off the caller's path).
func (r *rawRig) wait() { r.running.Wait() }

// close stops the parties, closes their connections and deletes the row's
// streams, so the next row starts on an empty store.
func (r *rawRig) close(ctx context.Context) {
	for i := len(r.stop) - 1; i >= 0; i-- {
		r.stop[i]()
	}
	for _, nc := range r.conns {
		nc.Close()
	}
	dctx, cancel := opCtx(ctx)
	defer cancel()
	for _, s := range r.streams {
		_ = r.js.DeleteStream(dctx, s)
	}
}

// call is one caller's request req for run id, waiting at most
// chainCallTimeout for the worker's answer.
func (r *rawRig) call(ctx context.Context, nc *nats.Conn, reqSub, req, id string) error {
	rctx, cancel := context.WithTimeout(ctx, chainCallTimeout)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, reqSub, []byte(req))
	if err != nil {
		if gerr := r.gatewayErr(); gerr != nil {
			return fmt.Errorf("run %s: %w (gateway: %v)", id, err, gerr)
		}
		return fmt.Errorf("run %s: %w", id, err)
	}
	if string(m.Data) != "ok "+id {
		return fmt.Errorf("reply %q for run %s", m.Data, id)
	}
	return nil
}
