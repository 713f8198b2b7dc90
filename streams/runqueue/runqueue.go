// Package runqueue is the SB_RUNS stream: run requests on
// <prefix>.runs.<agentId>, pulled by the gateways through one shared durable
// consumer, acked when their outcome is recorded, trimmed below the ack
// floor.
package runqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/runreq"
)

// Headers every run request carries, so loops are visible to any gateway
// without decoding the body.
const (
	HeaderChainID = "Sb-Chain-Id"
	HeaderHop     = "Sb-Hop"
)

// DedupeWindow is how long a repeated run id (idempotency key) is
// recognised by the queue itself; the run record catches it after.
const DedupeWindow = 10 * time.Minute

// The run request and its parts (bus/runreq): the body of every message on
// SB_RUNS.
type (
	Request     = runreq.Request
	Provenance  = runreq.Provenance
	A2A         = runreq.A2A
	Route       = runreq.Route
	AnnounceRef = runreq.AnnounceRef
	NoticeRef   = runreq.NoticeRef
)

// Queue is the run-request stream.
type Queue struct {
	bus.StreamConfig // recreated by bus.Guard (the consumer goes with a deleted stream: a gateway binds again)
	js               jetstream.JetStream
	names            bus.Names
	stream           jetstream.Stream
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new stream.
var WithReplicas = bus.WithReplicas

// Open creates the SB_RUNS stream if absent; an existing one keeps its
// settings.
//
// SB_RUNS works as a work queue — one durable consumer shared by every
// gateway, each run delivered to one of them, redelivered until acked —
// but with limits retention: acked runs are purged in bulk below the
// consumer's ack floor (Trim), not one by one on each ack. A work-queue
// stream removes each message as it is acked, and when the queue is
// drained (a run at a time) every ack empties the stream's last block, so
// the server writes a tombstone and a new block file per run: measured at
// about a sixth of a sequential send's CPU. Unacked runs never expire. An
// SB_RUNS created by an earlier version as a work-queue stream keeps
// working as one (Trim then finds nothing to purge).
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Queue, error) {
	o := bus.ApplyStoreOptions(opts)
	cfg := jetstream.StreamConfig{
		Name:        names.RunsStream(),
		Description: "sessionbus run requests; gateways pull, ack when the run is recorded finished",
		Subjects:    []string{names.Runs(">")},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.Replicas, 1),
		Duplicates:  DedupeWindow,
	}
	st, opened, err := bus.OpenStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return &Queue{StreamConfig: opened, js: js, names: names, stream: st}, nil
}

// Stream is the run-request stream.
func (q *Queue) Stream() jetstream.Stream { return q.stream }

// Unfinished is the number of queued runs the gateways have not acked:
// waiting for a gateway or running. Before any gateway started, it is
// every run in the stream.
func (q *Queue) Unfinished(ctx context.Context) (uint64, error) {
	c, err := q.stream.Consumer(ctx, q.names.GatewaysConsumer())
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		info, err := q.stream.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.State.Msgs, nil
	}
	if err != nil {
		return 0, err
	}
	info := c.CachedInfo()
	return info.NumPending + uint64(info.NumAckPending), nil
}

// Trim purges the runs every gateway is done with: those at or below the
// shared consumer's ack floor. Any gateway may call it at any time;
// concurrent calls purge the same prefix. It returns the messages purged.
func (q *Queue) Trim(ctx context.Context) (uint64, error) {
	c, err := q.stream.Consumer(ctx, q.names.GatewaysConsumer())
	if err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	floor := c.CachedInfo().AckFloor.Stream
	if floor == 0 {
		return 0, nil
	}
	info, err := q.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	if info.State.Msgs == 0 || info.State.FirstSeq > floor {
		return 0, nil
	}
	before := info.State.Msgs
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return 0, fmt.Errorf("trim runs below %d: %w", floor+1, err)
	}
	after, err := q.stream.Info(ctx)
	if err != nil {
		return 0, nil
	}
	return before - min(before, after.State.Msgs), nil
}

// Publish queues a run request (also used for A2A continuation steps,
// whose message id is runId + step).
func (q *Queue) Publish(ctx context.Context, req *Request) error {
	msg, id, err := q.message(req)
	if err != nil {
		return err
	}
	// While an R3 stream elects a new leader a publish times out or finds
	// no responder; the same message id again is safe (SB_RUNS drops a
	// duplicate), and giving up would mark an idempotent run failed for
	// good, since a retry of the call finds its record.
	deadline := time.Now().Add(publishRetryFor)
	for {
		_, err := q.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !q.transientPublish(ctx, err) || time.Now().After(deadline) {
			return fmt.Errorf("queue run %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue run %s: %w", id, err)
		case <-time.After(publishRetryWait):
		}
	}
}

// publishRetryFor bounds Publish's retries: a leader election takes a few
// seconds, more on a loaded machine.
const (
	publishRetryFor  = 30 * time.Second
	publishRetryWait = 200 * time.Millisecond
)

// transientPublish reports a publish failure that a leader change
// explains: no acknowledgement in time, the stream temporarily unavailable
// (503), the same message id still in process on the new leader (409,
// JetStream error 10158), or no responder while the stream exists (a
// cluster between two leaders). No responder because SB_RUNS was deleted
// is not: the caller hears so at once.
func (q *Queue) transientPublish(ctx context.Context, err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || bus.IsMsgIDInProcess(err)
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		_, serr := q.js.Stream(ctx, q.names.RunsStream())
		return !errors.Is(serr, jetstream.ErrStreamNotFound)
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// PublishAsync is Publish without waiting for the acknowledgement: the
// request is on the connection, behind what the caller wrote before it
// (the server reads a connection in order), when it returns.
func (q *Queue) PublishAsync(req *Request) (jetstream.PubAckFuture, error) {
	msg, id, err := q.message(req)
	if err != nil {
		return nil, err
	}
	f, err := q.js.PublishMsgAsync(msg, jetstream.WithMsgID(id))
	if err != nil {
		return nil, fmt.Errorf("queue run %s: %w", id, err)
	}
	return f, nil
}

// message is req as published, and its message id (the run id, or runId
// + step): SB_RUNS drops a repeat within its dedupe window.
func (q *Queue) message(req *Request) (*nats.Msg, string, error) {
	body, err := bus.Marshal(req) // carries whole messages: no HTML escaping
	if err != nil {
		return nil, "", err
	}
	msg := nats.NewMsg(q.names.Runs(req.AgentID))
	msg.Data = body
	msg.Header.Set(HeaderChainID, req.ChainID)
	msg.Header.Set(HeaderHop, strconv.Itoa(req.Hop))
	id := req.RunID
	if req.Step != "" {
		id = req.ParentRun + ":" + req.Step
	}
	return msg, id, nil
}
