package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// raw_send_chain: the NATS traffic of one send_wait call, made by bare
// nats.go clients with none of sessionbus's code: the floor under
// send_wait on this machine. A responder (the worker, on an in-process
// connection) queues a run on a stream and waits for its outcome on a KV
// watch; a puller (the gateway, on another in-process connection) does
// what a gateway does per run, in the same four waves: take the lane (a
// compare-and-set from the revision the last run held it at); record
// running and append the prompt; append the reply; record the outcome
// (which frees the lane: no release is written), move the index and touch
// the session; then acks. A second watch on the sessions bucket stands for
// the worker's session index. Bodies have the sizes of the real ones.
//
// What send_wait costs above this row is sessionbus's own work: parsing,
// policy, JSON, the sanitizer, goroutine hand-offs.

const (
	chainPrefix  = "bench_chain_"
	chainRunsSub = "bench.chain.runs"
	chainTrSub   = "bench.chain.tr.s"
	chainReqSub  = "bench.chain.req"
	chainKey     = "s"
	// chainCallTimeout bounds one call: a failed run is never retried
	// (nothing here redelivers), so it surfaces as this timeout.
	chainCallTimeout = 10 * time.Second
)

func runRawSendChain(ctx context.Context, e *env) (Result, error) {
	return runChainShape(ctx, e, shapeToday)
}

// raw_send_chain_3wave and raw_send_chain_2wave: the same traffic in the
// shapes a leaner send path could take, to measure the floor of
// each before building it. With sync on every write the cost is the disk
// flushes on the caller's path, not the client's round trips, so each
// shape is the least a design of that shape must wait for.
func runRawSendChain3Wave(ctx context.Context, e *env) (Result, error) {
	return runChainShape(ctx, e, shape3Wave)
}

func runRawSendChain2Wave(ctx context.Context, e *env) (Result, error) {
	return runChainShape(ctx, e, shape2Wave)
}

// chainShape is how a gateway lays a run's writes out in waves.
type chainShape int

const (
	// shapeToday is the send path as built: take the lane; record running
	// and append the prompt; append the reply; record the outcome, move the
	// index and touch the session. 8 writes in 5 waves (W1 included).
	shapeToday chainShape = iota
	// shape3Wave keeps a durable running record and prompt before the turn
	// but writes no lane (the lane rides on the prompt's compare-and-set),
	// writes the reply and the outcome together (a crash between them is
	// repaired from the outcome), and moves the index and the session
	// touch after the outcome, off the caller's path. 7 writes, 3 waves
	// on the caller's path (W1, running+prompt, reply+outcome).
	shape3Wave
	// shape2Wave writes nothing before the turn ends: the prompt and the
	// reply go out back to back (only the prompt compare-and-set; on a
	// single node nothing cheaper than an atomic batch makes the pair one
	// write, see docs/performance.md) beside the outcome; index and touch
	// after. 6 writes, 2 waves on the caller's path.
	shape2Wave
)

func (s chainShape) dataset() string {
	switch s {
	case shape3Wave:
		return "raw nats.go: request, stream publish, pull delivery, waves [running record + prompt] [reply + outcome] then [index + touch] off the caller's path; KV watch, reply"
	case shape2Wave:
		return "raw nats.go: request, stream publish, pull delivery, one wave [prompt, reply pipelined + outcome] then [index + touch] off the caller's path; KV watch, reply"
	}
	return "raw nats.go: request, stream publish, pull delivery, 4 waves of 8 KV/stream writes, KV watch, reply"
}

func runChainShape(ctx context.Context, e *env, shape chainShape) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	c, err := newChain(cctx, e, shape)
	if err != nil {
		return Result{}, err
	}
	defer c.close(context.WithoutCancel(ctx))
	before, err := streamLastSeqs(cctx, c.js, c.streams) // after the set-up's writes
	if err != nil {
		return Result{}, err
	}
	var n atomic.Int64
	r, err := measure(ctx, e.sz.send, func() error {
		id := strconv.FormatInt(n.Add(1), 10)
		return c.call(cctx, e.nc, chainReqSub, id, id)
	})
	r.Dataset = shape.dataset()
	if err != nil {
		return r, err
	}
	calls := e.sz.send.warm + e.sz.send.ops
	per, total, err := c.writesPerCall(cctx, before, calls)
	if err != nil {
		return r, err
	}
	r.WritesPerSend = per
	r.Dataset += fmt.Sprintf("; %.2f stream writes per call (%s)", total, writesLine(per))
	return r, nil
}

// chain is the storage and the two parties of raw_send_chain: a worker
// (conns[0]) and a gateway (conns[1]).
type chain struct {
	rawRig
	gw *chainGateway
}

// writesPerCall is, per stream, the messages stored since before (the
// streams' last sequences) divided by calls, once the last run's writes off
// the caller's path are done too.
func (c *chain) writesPerCall(ctx context.Context, before map[string]uint64, calls int) (map[string]float64, float64, error) {
	// The last run holds mu until its last wave is acknowledged; holding it
	// while counting keeps any run from writing meanwhile.
	c.gw.mu.Lock()
	defer c.gw.mu.Unlock()
	after, err := streamLastSeqs(ctx, c.js, c.streams)
	if err != nil {
		return nil, 0, err
	}
	per, total := writesPer(before, after, calls)
	return per, total, nil
}

func newChain(ctx context.Context, e *env, shape chainShape) (c *chain, err error) {
	c = &chain{}
	defer func() {
		if err != nil {
			c.close(context.WithoutCancel(ctx))
		}
	}()
	if err := c.setUp(ctx, e, []jetstream.StreamConfig{
		{Name: "BENCH_CHAIN_RUNS", Subjects: []string{chainRunsSub}},
		{Name: "BENCH_CHAIN_TR", Subjects: []string{chainTrSub}},
	}, chainPrefix, []string{"lanes", "runs", "sessions", "index"}, "bench chain worker", "bench chain gateway"); err != nil {
		return nil, err
	}
	// The worker answers on the runs bucket; its watch on sessions stands
	// for its session index.
	if err := c.startWorker(ctx, c.conns[0], rawWorker{reqSub: chainReqSub, runsSub: chainRunsSub, answerOn: []string{"runs"}, follow: []string{"sessions"}}); err != nil {
		return nil, err
	}
	return c, c.startGateway(ctx, shape)
}

// startGateway runs each queued run in the shape's waves.
func (c *chain) startGateway(ctx context.Context, shape chainShape) error {
	js, kv, err := c.openKV(ctx, c.conns[1])
	if err != nil {
		return err
	}
	g := &chainGateway{js: js, kv: kv, ctx: context.WithoutCancel(ctx), shape: shape}
	c.gw = g
	if g.laneRev, err = kv.lanes.Put(ctx, chainKey, []byte(`{"expiresAt":0}`)); err != nil {
		return err
	}
	if g.sessRev, err = kv.sessions.Put(ctx, chainKey, payload(600)); err != nil {
		return err
	}
	return c.pull(ctx, js, "BENCH_CHAIN_RUNS", "chain", g.run)
}

type chainGateway struct {
	// mu holds a run's writes together: the next run of the session waits
	// for the last one's outcome wave, as a gateway's next run does.
	mu               sync.Mutex
	js               jetstream.JetStream
	kv               rawKV
	ctx              context.Context
	laneRev, sessRev uint64
	trSeq            uint64
	shape            chainShape
}

var (
	chainRunning = append([]byte(`{"status":"running",`), payload(200)...)
	chainOutcome = append([]byte(`{"status":"ok",`), payload(250)...)
)

// run is one run's writes, wave by wave, each wave's writes in parallel.
func (g *chainGateway) run(data []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, _, _ := bytes.Cut(data, []byte(" "))
	run := string(id)
	ctx := g.ctx
	switch g.shape {
	case shape3Wave:
		if err := wave(g.running(run), g.appendOp(payload(400))); err != nil {
			return err
		}
		if err := wave(g.appendOp(payload(150)), g.outcome(run)); err != nil {
			return err
		}
		return wave(g.index(), g.touch())
	case shape2Wave:
		if err := wave(g.promptAndReply(payload(400), payload(150)), g.outcome(run)); err != nil {
			return err
		}
		return wave(g.index(), g.touch())
	}
	rev, err := g.kv.lanes.Update(ctx, chainKey, []byte(`{"runId":"`+run+`","expiresAt":1}`), g.laneRev)
	if err != nil {
		return err
	}
	g.laneRev = rev
	if err := wave(g.running(run), g.appendOp(payload(400))); err != nil {
		return err
	}
	if err := g.append(ctx, payload(150)); err != nil {
		return err
	}
	return wave(g.outcome(run), g.index(), g.touch())
}

func (g *chainGateway) running(run string) func() error {
	return func() error { _, err := g.kv.runs.Put(g.ctx, run, chainRunning); return err }
}

// outcome is the write the worker's watch answers the caller on.
func (g *chainGateway) outcome(run string) func() error {
	return func() error { _, err := g.kv.runs.Put(g.ctx, run, chainOutcome); return err }
}

func (g *chainGateway) index() func() error {
	return func() error { _, err := g.kv.index.Put(g.ctx, chainKey, payload(100)); return err }
}

func (g *chainGateway) touch() func() error {
	return func() error {
		rev, err := g.kv.sessions.Update(g.ctx, chainKey, payload(600), g.sessRev)
		g.sessRev = rev
		return err
	}
}

func (g *chainGateway) appendOp(data []byte) func() error {
	return func() error { return g.append(g.ctx, data) }
}

// promptAndReply sends the prompt (compare-and-set) and the reply right
// behind it on the same stream without waiting in between: the server
// stores one connection's messages to one stream in order.
func (g *chainGateway) promptAndReply(prompt, reply []byte) func() error {
	return func() error {
		p, err := g.js.PublishAsync(chainTrSub, prompt, jetstream.WithExpectLastSequencePerSubject(g.trSeq))
		if err != nil {
			return err
		}
		r, err := g.js.PublishAsync(chainTrSub, reply)
		if err != nil {
			return err
		}
		for _, f := range []jetstream.PubAckFuture{p, r} {
			select {
			case ack := <-f.Ok():
				g.trSeq = ack.Sequence
			case err := <-f.Err():
				return err
			case <-g.ctx.Done():
				return g.ctx.Err()
			}
		}
		return nil
	}
}

// append is a transcript append: a compare-and-set on the subject's last
// sequence.
func (g *chainGateway) append(ctx context.Context, data []byte) error {
	ack, err := g.js.Publish(ctx, chainTrSub, data, jetstream.WithExpectLastSequencePerSubject(g.trSeq))
	if err != nil {
		return err
	}
	g.trSeq = ack.Sequence
	return nil
}

func wave(ops ...func() error) error {
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() { errs[i] = op() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
