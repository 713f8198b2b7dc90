package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// raw_send_concurrent*: send_concurrent's load (32 senders, each waiting
// for its reply from its own session, 2 gateways) made by bare nats.go
// clients, in a given shape of writes. With every write synced, throughput
// is bounded by how many synced writes the disk takes a second, shared by
// all streams; these rows are the floor of each shape on this machine, run
// beside send_concurrent so the ratio between them holds under load.
//
// A shape is its gateway waves; the worker's run request (SB_RUNS) comes
// first in every shape, and the worker answers its caller when the outcome
// shows up on its runs watch. Every wave of a session's run is written
// before its next run starts (a lane holds a session to one run at a time).

// ccOp is one write of a run.
type ccOp string

const (
	ccLane    ccOp = "lane"    // compare-and-set of the session's lane key
	ccRunning ccOp = "running" // the run record, running
	ccPrompt  ccOp = "prompt"  // transcript append, compare-and-set
	ccReply   ccOp = "reply"   // transcript append right behind the prompt's
	ccOutcome ccOp = "outcome" // the run record's outcome: the caller is answered
	ccIndex   ccOp = "index"   // the transcript index head
	ccTouch   ccOp = "touch"   // the session entry's updatedAt (compare-and-set)
	// no write: direct gets of the transcript's newest entry and the
	// session entry, as a run's claim reads them
	ccReads ccOp = "reads"
	// the same writes on streams of their own: the reply on a second
	// transcript stream, the outcome in a second bucket
	ccReplyApart   ccOp = "reply(own stream)"
	ccOutcomeApart ccOp = "outcome(own bucket)"
)

// ccShapes are the shapes measured, by row.
var ccShapes = map[string][][]ccOp{
	// today: 8 writes, 5 waves (W1, lane, running+prompt, reply, outcome+index+touch)
	"raw_send_concurrent": {{ccLane}, {ccRunning, ccPrompt}, {ccReply}, {ccOutcome, ccIndex, ccTouch}},
	// no lane write (the prompt's compare-and-set is the hold), reply and
	// outcome in one wave, the index head and touch after: 7 writes
	"raw_send_concurrent_7w": {{ccRunning, ccPrompt}, {ccReply, ccOutcome}, {ccIndex, ccTouch}},
	// as 7w with the index head written only when it is not carried by
	// the transcript itself: 6 writes, 3 waves on the caller's path
	"raw_send_concurrent_6w": {{ccRunning, ccPrompt}, {ccReply, ccOutcome}, {ccTouch}},
	// as 6w without the touch either: 5 writes
	"raw_send_concurrent_5w": {{ccRunning, ccPrompt}, {ccReply, ccOutcome}},
	// what the gateway runs: 6 writes (the index head's few a send aside),
	// 5 waves, one of them reads; the reply before the outcome, so a
	// caller answered reads its reply
	"raw_send_concurrent_6w_built": {{ccReads}, {ccRunning, ccPrompt}, {ccReply}, {ccOutcome, ccTouch}},
	// 6w's writes and waves with no stream taking two writes of a send
	"raw_send_concurrent_6w_apart": {{ccRunning, ccPrompt}, {ccReplyApart, ccOutcomeApart}, {ccTouch}},
}

func runRawSendConcurrent(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent")
}

func runRawSendConcurrent7w(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent_7w")
}

func runRawSendConcurrent6wBuilt(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent_6w_built")
}

func runRawSendConcurrent6w(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent_6w")
}

func runRawSendConcurrent5w(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent_5w")
}

func runRawSendConcurrent6wApart(ctx context.Context, e *env) (Result, error) {
	return e.runCCShape(ctx, "raw_send_concurrent_6w_apart")
}

func (e *env) runCCShape(ctx context.Context, name string) (Result, error) {
	shape := ccShapes[name]
	cctx, cancel := opCtx(ctx)
	defer cancel()
	c, err := newCC(cctx, e, shape)
	if err != nil {
		return Result{}, err
	}
	defer c.close(context.WithoutCancel(ctx))
	before, err := streamLastSeqs(cctx, c.js, c.streams)
	if err != nil {
		return Result{}, err
	}
	var n atomic.Int64
	r, err := measureConcurrent(cctx, sendSenders, e.ccPlan(1), func(w int) func() error {
		return func() error {
			id := strconv.FormatInt(n.Add(1), 10)
			return c.call(cctx, e.nc, ccReqSub, strconv.Itoa(w)+" "+id, id)
		}
	})
	if err != nil {
		return r, err
	}
	c.wait()
	after, err := streamLastSeqs(cctx, c.js, c.streams)
	if err != nil {
		return r, err
	}
	per, total := writesPer(before, after, int(n.Load()))
	r.WritesPerSend = per
	waves := make([]string, len(shape))
	for i, w := range shape {
		ops := make([]string, len(w))
		for j, op := range w {
			ops[j] = string(op)
		}
		waves[i] = "[" + strings.Join(ops, " + ") + "]"
	}
	r.Dataset = fmt.Sprintf("raw nats.go: %d senders, 1 session each, 2 gateway connections; run request then %s; %.2f stream writes per call (%s)",
		sendSenders, strings.Join(waves, " "), total, writesLine(per))
	return r, nil
}

// ccPlan is the calls of a raw_send_concurrent, publish or fsync row:
// send_concurrent's, times k; with --quick, one call per sender of each
// phase, so these rows add little to the quick suite.
func (e *env) ccPlan(k int) plan {
	if e.o.Quick {
		return plan{warm: sendSenders * k, ops: sendSenders * k}
	}
	return plan{warm: e.sz.sendTput.warm * k, ops: e.sz.sendTput.ops * k}
}

const (
	ccPrefix  = "bench_cc_"
	ccRunsSub = "bench.cc.runs"
	ccTrSub   = "bench.cc.tr."
	ccTr2Sub  = "bench.cc.tr2."
	ccReqSub  = "bench.cc.req"
)

// cc is the storage and the parties of one raw_send_concurrent row: a
// worker (conns[0]) and two gateways.
type cc struct {
	rawRig
	shape [][]ccOp
	sess  sync.Map // session number -> *ccSession
}

// ccSession is one session's state, shared by both gateways (the raw
// stand-in for a lane: one run of a session at a time).
type ccSession struct {
	mu                      sync.Mutex
	laneRev, sessRev, trSeq uint64
}

func newCC(ctx context.Context, e *env, shape [][]ccOp) (c *cc, err error) {
	c = &cc{shape: shape}
	defer func() {
		if err != nil {
			c.close(context.WithoutCancel(ctx))
		}
	}()
	if err := c.setUp(ctx, e, []jetstream.StreamConfig{
		{Name: "BENCH_CC_RUNS", Subjects: []string{ccRunsSub}},
		{Name: "BENCH_CC_TR", Subjects: []string{ccTrSub + "*"}, AllowDirect: true},
		{Name: "BENCH_CC_TR2", Subjects: []string{ccTr2Sub + "*"}},
	}, ccPrefix, []string{"lanes", "runs", "sessions", "index", "outcomes"}, "bench cc worker", "bench cc gateway 1", "bench cc gateway 2"); err != nil {
		return nil, err
	}
	// An outcome written to its own bucket answers the caller as one in
	// the runs bucket does.
	if err := c.startWorker(ctx, c.conns[0], rawWorker{reqSub: ccReqSub, runsSub: ccRunsSub, answerOn: []string{"runs", "outcomes"}}); err != nil {
		return nil, err
	}
	if err := c.seed(ctx); err != nil {
		return nil, err
	}
	for _, nc := range c.conns[1:] {
		if err := c.startGateway(ctx, nc); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// seed writes each session's lane and entry, as a session has them before
// its first send.
func (c *cc) seed(ctx context.Context) error {
	_, kv, err := c.openKV(ctx, c.conns[1])
	if err != nil {
		return err
	}
	for i := range sendSenders {
		s := &ccSession{}
		k := strconv.Itoa(i)
		if s.laneRev, err = kv.lanes.Put(ctx, k, []byte(`{"expiresAt":0}`)); err != nil {
			return err
		}
		if s.sessRev, err = kv.sessions.Put(ctx, k, payload(600)); err != nil {
			return err
		}
		c.sess.Store(k, s)
	}
	return nil
}

// startGateway pulls runs from the shared durable consumer and writes each
// in the row's shape.
func (c *cc) startGateway(ctx context.Context, nc *nats.Conn) error {
	js, _, err := c.openKV(ctx, nc)
	if err != nil {
		return err
	}
	g := &ccGateway{c: c, js: js, ctx: context.WithoutCancel(ctx)}
	return c.pull(ctx, js, "BENCH_CC_RUNS", "cc", g.run)
}

type ccGateway struct {
	c   *cc
	js  jetstream.JetStream
	ctx context.Context
}

// run writes one run's waves, each wave's writes in parallel, holding the
// session for all of them.
func (g *ccGateway) run(data []byte) error {
	parts := bytes.SplitN(data, []byte(" "), 3)
	if len(parts) < 3 {
		return fmt.Errorf("bad run request %q", data)
	}
	key, run := string(parts[0]), string(parts[1])
	v, ok := g.c.sess.Load(key)
	if !ok {
		return fmt.Errorf("no session %q", key)
	}
	s := v.(*ccSession)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range g.c.shape {
		if err := g.wave(s, key, run, w); err != nil {
			return err
		}
	}
	return nil
}

// wave sends a wave's writes back to back and waits for all their acks. A
// prompt and a reply in one wave go out in order on the session's subject,
// the reply's compare-and-set naming the prompt's sequence-to-be.
func (g *ccGateway) wave(s *ccSession, key, run string, ops []ccOp) error {
	type pending struct {
		op  ccOp
		ack jetstream.PubAckFuture
	}
	var fs []pending
	pub := func(op ccOp, subj string, data []byte, opts ...jetstream.PublishOpt) error {
		f, err := g.js.PublishAsync(subj, data, opts...)
		if err == nil {
			fs = append(fs, pending{op, f})
		}
		return err
	}
	kvSub := func(bucket string) string { return "$KV." + ccPrefix + bucket + "." }
	var err error
	trFirst := true
	for _, op := range ops {
		switch op {
		case ccReads:
			err = g.reads(key)
		case ccLane:
			err = pub(op, kvSub("lanes")+key, []byte(`{"runId":"`+run+`","expiresAt":1}`), jetstream.WithExpectLastSequencePerSubject(s.laneRev))
		case ccRunning:
			err = pub(op, kvSub("runs")+run, chainRunning)
		case ccReplyApart:
			err = pub(op, ccTr2Sub+key, payload(150))
		case ccOutcomeApart:
			err = pub(op, kvSub("outcomes")+run, chainOutcome)
		case ccPrompt, ccReply:
			size := 400
			if op == ccReply {
				size = 150
			}
			var opts []jetstream.PublishOpt
			if trFirst { // the next in this wave follows without a condition (its sequence is not known yet)
				opts = append(opts, jetstream.WithExpectLastSequencePerSubject(s.trSeq))
			}
			trFirst = false
			err = pub(op, ccTrSub+key, payload(size), opts...)
		case ccOutcome:
			err = pub(op, kvSub("runs")+run, chainOutcome)
		case ccIndex:
			err = pub(op, kvSub("index")+key, payload(100))
		case ccTouch:
			err = pub(op, kvSub("sessions")+key, payload(600), jetstream.WithExpectLastSequencePerSubject(s.sessRev))
		}
		if err != nil {
			return err
		}
	}
	for _, p := range fs {
		select {
		case ack := <-p.ack.Ok():
			switch p.op {
			case ccLane:
				s.laneRev = ack.Sequence
			case ccPrompt, ccReply:
				s.trSeq = max(s.trSeq, ack.Sequence)
			case ccTouch:
				s.sessRev = ack.Sequence
			}
		case err := <-p.ack.Err():
			return fmt.Errorf("%s: %w", p.op, err)
		case <-g.ctx.Done():
			return g.ctx.Err()
		}
	}
	return nil
}

// reads makes a claim's reads: the transcript's newest entry and the
// session entry, two direct gets in parallel.
func (g *ccGateway) reads(key string) error {
	nc := g.js.Conn()
	subjects := []string{
		"$JS.API.DIRECT.GET.BENCH_CC_TR." + ccTrSub + key,
		"$JS.API.DIRECT.GET.KV_" + ccPrefix + "sessions.$KV." + ccPrefix + "sessions." + key,
	}
	errs := make(chan error, len(subjects))
	for _, subj := range subjects {
		go func() {
			_, err := nc.RequestWithContext(g.ctx, subj, nil)
			errs <- err
		}()
	}
	var err error
	for range subjects {
		err = errors.Join(err, <-errs)
	}
	return err
}

// raw_js_publish_concurrent: the disk's synced write rate as the send
// rows see it: 32 publishers, each waiting for its ack before its next
// publish, spread over 6 file streams (a send's writes touch six). ops/s
// is writes a second; a shape of k writes per send cannot pass ops/s / k.
func runRawJSPublishConcurrent(ctx context.Context, e *env) (Result, error) {
	return e.publishConcurrent(ctx, 6)
}

// raw_js_publish_concurrent_1s: the same publishers on one stream, whose
// writes the server stores (and syncs) one at a time.
func runRawJSPublishConcurrent1s(ctx context.Context, e *env) (Result, error) {
	return e.publishConcurrent(ctx, 1)
}

func (e *env) publishConcurrent(ctx context.Context, nStreams int) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	var names []string
	defer func() {
		dctx, c := opCtx(context.WithoutCancel(ctx))
		defer c()
		for _, n := range names {
			_ = e.js.DeleteStream(dctx, n)
		}
	}()
	for i := range nStreams {
		name := fmt.Sprintf("BENCH_PUBC_%d", i)
		if _, err := e.js.CreateStream(cctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{fmt.Sprintf("bench.pubc.%d.*", i)}, Storage: jetstream.FileStorage,
		}); err != nil {
			return Result{}, err
		}
		names = append(names, name)
	}
	data := payload(256)
	r, err := measureConcurrent(cctx, sendSenders, e.ccPlan(2), func(w int) func() error {
		i := 0
		return func() error {
			i++
			_, err := e.js.Publish(cctx, fmt.Sprintf("bench.pubc.%d.%d", (w+i)%nStreams, w), data)
			return err
		}
	})
	r.Dataset = fmt.Sprintf("256 B, %d publishers each waiting for its ack, over %d file streams R1", sendSenders, nStreams)
	return r, err
}

// raw_fsync_1file and raw_fsync_6files: the disk under the server's store,
// with no NATS at all: 300 B appended and synced in a loop, by one
// goroutine on one file, and by six each on its own. ops/s is syncs a
// second. The server syncs a stream's writes one at a time, so the first
// is about what one stream can take and the second what six can together.
func runRawFsync1(ctx context.Context, e *env) (Result, error) { return e.fsyncFiles(ctx, 1) }

func runRawFsync6(ctx context.Context, e *env) (Result, error) { return e.fsyncFiles(ctx, 6) }

func (e *env) fsyncFiles(ctx context.Context, n int) (Result, error) {
	dir, err := os.MkdirTemp(e.dir, "fsync")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	files := make([]*os.File, n)
	for i := range files {
		if files[i], err = os.Create(filepath.Join(dir, strconv.Itoa(i))); err != nil {
			return Result{}, err
		}
		defer files[i].Close()
	}
	buf := payload(300)
	r, err := measureConcurrent(ctx, n, e.ccPlan(n), func(w int) func() error {
		return func() error {
			if _, err := files[w].Write(buf); err != nil {
				return err
			}
			return files[w].Sync()
		}
	})
	r.Dataset = fmt.Sprintf("300 B write + fsync, %d goroutine(s) each on its own file, in the server's data directory", n)
	return r, err
}
