package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/streams/deadletters"
	"github.com/sessionbus/sessionbus/streams/deliveries"
)

// Deliveries is a running delivery loop (Start).
type Deliveries struct {
	cc     jetstream.ConsumeContext
	lanes  *lanes
	cancel context.CancelFunc
}

// Start posts the channel's deliveries until Stop. Every adapter process
// of the channel reads the one durable consumer named for the channel on
// SB_DELIVER, so each delivery goes to one of them, and one that dies
// leaves its unacked deliveries to the others after the ack wait. A
// delivery is acked only after the receiver answered 2xx, or after its
// dead letter is stored. Start returns once the consumer exists (waiting
// for the stream while ctx allows), so a message taken on /inbound after
// it has its reply delivered.
func (a *Adapter) Start(ctx context.Context) (*Deliveries, error) {
	cons, err := a.consumer(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &lanes{a: a, ctx: lctx, q: map[string][]jetstream.Msg{}, held: map[uint64]bool{}}
	cc, err := cons.Consume(l.push, jetstream.PullMaxMessages(max(a.o.MaxInFlight, 2)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			a.o.Log.Warn("webhook adapter: reading deliveries", "channel", a.o.Channel, "err", err)
		}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("read deliveries of channel %s: %w", a.o.Channel, err)
	}
	l.wg.Add(1)
	go l.keepAlive()
	return &Deliveries{cc: cc, lanes: l, cancel: cancel}, nil
}

// Stop takes no more deliveries, hands the ones waiting or in retry back
// to the server for another adapter, and returns when none is in flight.
func (d *Deliveries) Stop() {
	d.cc.Stop()
	// cancelled under the lanes' lock, so a push either saw it (and started
	// nothing) or added its lane before the Wait below
	d.lanes.mu.Lock()
	d.cancel()
	d.lanes.mu.Unlock()
	d.lanes.wg.Wait()
}

// ConsumerConfig is the durable consumer every adapter process of the
// channel shares. It starts at the deliveries published after it was made
// (a new adapter does not replay a channel's history), retries without a
// limit of its own (the adapter counts attempts and dead-letters), and
// hands out at most MaxInFlight deliveries at a time.
func (a *Adapter) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       a.o.Channel,
		Description:   "sessionbus webhook adapter of channel " + a.o.Channel,
		FilterSubject: a.o.Names.Deliver(a.o.Channel),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       a.o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: a.o.MaxInFlight,
	}
}

// consumer makes (or updates) the channel's durable, waiting for SB_DELIVER
// while no worker or gateway has created it yet.
func (a *Adapter) consumer(ctx context.Context) (jetstream.Consumer, error) {
	stream := a.o.Names.DeliverStream()
	for logged := false; ; {
		c, err := a.js.CreateOrUpdateConsumer(ctx, stream, a.ConsumerConfig())
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			// an existing durable whose settings cannot change (its start
			// policy) is used as it is
			if c, err2 := a.js.Consumer(ctx, stream, a.o.Channel); err2 == nil {
				a.o.Log.Warn("webhook adapter: using the channel's consumer as it is", "consumer", a.o.Channel, "err", err)
				return c, nil
			}
			return nil, fmt.Errorf("create the consumer %s on %s: %w", a.o.Channel, stream, err)
		}
		if !logged {
			a.o.Log.Warn("webhook adapter: waiting for the deliveries stream (start sessionbus serve, a worker or a gateway)", "stream", stream)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(consumerRetryGap):
		}
	}
}

// lanes keeps one delivery in flight per session: deliveries of a session
// wait, in the order the stream gave them, behind the one being posted.
type lanes struct {
	a    *Adapter
	ctx  context.Context
	mu   sync.Mutex
	q    map[string][]jetstream.Msg
	held map[uint64]bool // stream sequences in q
	wg   sync.WaitGroup
}

func (l *lanes) push(m jetstream.Msg) {
	var d deliveries.Delivery
	_ = json.Unmarshal(m.Data(), &d)
	key := d.SessionKey
	if key == "" {
		key = "to:" + d.To
	}
	seq := streamSeq(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		// handed to this callback after Stop (nats.go may still dispatch
		// what it had received): back to the server for another adapter,
		// and no lane may start once Stop waits for them
		_ = m.Nak()
		return
	}
	if l.held[seq] {
		// handed out again while it waited here (keepAlive was late):
		// the copy held already posts it, and its ack covers this one
		return
	}
	l.held[seq] = true
	if q, busy := l.q[key]; busy {
		l.q[key] = append(q, m)
		return
	}
	l.q[key] = []jetstream.Msg{m}
	l.wg.Add(1)
	go l.run(key)
}

func (l *lanes) run(key string) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		m := l.q[key][0]
		l.mu.Unlock()
		l.a.deliver(l.ctx, m)
		l.mu.Lock()
		delete(l.held, streamSeq(m))
		l.q[key] = l.q[key][1:]
		if len(l.q[key]) == 0 {
			delete(l.q, key)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// keepAlive tells the server, a few times per ack wait, that every
// delivery this process holds (posting, in retry, or waiting behind its
// session's) is still being worked on, so none is handed to another
// adapter, which would post it twice or out of order.
func (l *lanes) keepAlive() {
	defer l.wg.Done()
	t := time.NewTicker(l.a.o.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		for _, q := range l.q {
			for _, m := range q {
				_ = m.InProgress()
			}
		}
		l.mu.Unlock()
	}
}

func streamSeq(m jetstream.Msg) uint64 {
	meta, err := m.Metadata()
	if err != nil {
		return 0
	}
	return meta.Sequence.Stream
}

// DeliveryID is a delivery's idempotency id: the id the gateway published
// it with (the run id and ":reply", or ":announce"), the same across
// retries, redeliveries and a republish; the stream sequence when absent.
func DeliveryID(m jetstream.Msg) string {
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		return id
	}
	return "seq-" + strconv.FormatUint(streamSeq(m), 10)
}

// deliver posts one delivery until the receiver takes it or the attempts
// run out, then acks it. On shutdown it leaves the delivery to another
// adapter at once (a nak) instead of after the ack wait.
func (a *Adapter) deliver(ctx context.Context, m jetstream.Msg) {
	id := DeliveryID(m)
	var status int
	var lastErr error
	wait := a.o.Backoff
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			_ = m.Nak()
			return
		}
		// the clock of the ack wait starts again for this POST
		_ = m.InProgress()
		status, lastErr = a.post(ctx, id, attempt, m.Data())
		if lastErr == nil {
			// acked even when the adapter is stopping: the POST was taken
			if err := ack(m); err != nil {
				a.o.Log.Warn("webhook adapter: ack after a delivered POST failed; the delivery may be posted again under its id", "delivery", id, "err", err)
			}
			return
		}
		if ctx.Err() != nil {
			_ = m.Nak()
			return
		}
		a.o.Log.Warn("webhook adapter: POST failed", "delivery", id, "attempt", attempt, "status", status, "err", lastErr)
		if attempt >= a.o.Attempts {
			break
		}
		if bus.Sleep(ctx, wait) != nil {
			_ = m.Nak()
			return
		}
		wait = min(2*wait, MaxBackoff)
	}
	a.deadLetter(ctx, m, id, status, lastErr)
}

// ack acks m and waits for the server to confirm it, so a delivery the
// receiver took is not handed out again unless the ack itself was lost.
func ack(m jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.DoubleAck(ctx)
}

// post is one POST of body; nil error only for a 2xx answer. A POST under
// way finishes (within Timeout) even when the adapter is stopping: cut
// off, the receiver might have taken it unacked, and it would come again.
func (a *Adapter) post(ctx context.Context, id string, attempt int, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.o.DeliverURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sessionbus-webhook-adapter")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	req.Header.Set(HeaderChannel, a.o.Channel)
	switch {
	case a.o.Secret == nil:
	case a.o.LegacySignatures:
		req.Header.Set(HeaderSignature, SignBody(a.o.Secret, body))
	default:
		// signed for this attempt: a retry minutes later is not stale
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(a.o.Secret, ts, body))
	}
	resp, err := a.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// read a little of the answer, so the connection can be reused and a
	// failure's reason reaches the log and the dead letter
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s: %s", resp.Status, bytes.TrimSpace(snippet))
	}
	return resp.StatusCode, nil
}

// deadLetter records a delivery the receiver never took, then acks it.
// When the record cannot be stored the delivery is not acked: it comes
// back after a pause and is tried again, so nothing is lost unrecorded.
func (a *Adapter) deadLetter(ctx context.Context, m jetstream.Msg, id string, status int, lastErr error) {
	rec := deadletters.Record{DeliveryID: id, Channel: a.o.Channel, URL: a.o.DeliverURL, Attempts: a.o.Attempts,
		LastStatus: status, FailedAt: time.Now().UnixMilli(), Adapter: a.o.Instance}
	if lastErr != nil {
		rec.LastError = lastErr.Error()
	}
	var d deliveries.Delivery
	if json.Unmarshal(m.Data(), &d) == nil {
		rec.SessionKey = d.SessionKey
	}
	if json.Valid(m.Data()) {
		rec.Delivery = json.RawMessage(m.Data())
	} else {
		rec.Delivery, _ = json.Marshal(string(m.Data()))
	}
	pctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	if err := deadletters.Publish(pctx, a.js, a.o.Names, rec); err != nil {
		a.o.Log.Error("webhook adapter: cannot record a dead letter; the delivery stays queued", "delivery", id, "err", err)
		_ = m.NakWithDelay(MaxBackoff)
		return
	}
	a.o.Log.Error("webhook adapter: delivery given up, dead letter recorded", "delivery", id, "attempts", a.o.Attempts, "status", status, "err", lastErr)
	if err := ack(m); err != nil {
		a.o.Log.Warn("webhook adapter: ack of a dead letter failed", "delivery", id, "err", err)
	}
}
