package transcripts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// A round-robin load (one entry of each session, then the next round)
// gives the loader runs of one entry. Sent one by one, each is a plain
// publish, which with sync always costs the server one fsync per entry
// (a million entries: minutes, and thousands of publishes waiting on the
// disk at once). The loader instead sends the appends queued for different
// sessions as one atomic batch: the server commits it with one fsync, and
// each session's first message keeps its own expected-last-subject check
// (the server allows one per subject in a batch). Queued appends are always
// of different sessions: a session has at most one append pending.

// nextOp is the operation pump sends next and how many queued operations
// it consumes: a run of short appends at the head of the queue becomes one
// opGroup of at most MaxBatch messages.
func (l *Loader) nextOp() (*loadOp, int) {
	op := l.queue[0]
	if op.kind != opEntries {
		return op, 1
	}
	n, k := len(op.data), 1
	for k < len(l.queue) {
		next := l.queue[k]
		if next.kind != opEntries || n+len(next.data) > MaxBatch {
			break
		}
		n += len(next.data)
		k++
	}
	l.queued -= n
	if k == 1 {
		return op, 1
	}
	return &loadOp{kind: opGroup, parts: append([]*loadOp(nil), l.queue[:k]...)}, k
}

// msgCount is the number of messages op publishes.
func (op *loadOp) msgCount() int {
	switch op.kind {
	case opEntries:
		return len(op.data)
	case opGroup:
		n := 0
		for _, p := range op.parts {
			n += len(p.data)
		}
		return n
	}
	return 1
}

// groupMsgs builds the messages of every part, each as a lone append would
// (entry numbers, the first one's expected sequence), under one batch id.
func groupMsgs(op *loadOp) []*nats.Msg {
	var msgs []*nats.Msg
	for _, p := range op.parts {
		s := p.s
		msgs = append(msgs, buildEntryMsgs(s.subject, s.count, s.last, p.data, func() string { return "" })...)
	}
	id := newBatchID()
	for i, m := range msgs {
		m.Header["Nats-Batch-Id"] = []string{id}
		m.Header["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
	}
	msgs[len(msgs)-1].Header["Nats-Batch-Commit"] = []string{"1"}
	return msgs
}

// groupAcked hands each part its share of the batch's ack: the batch is
// contiguous in the stream, so part i's last entry is at the batch's first
// sequence plus the messages before it. A failed expected-sequence check
// fails the whole batch without saying which session's: every part then
// takes the conflict path (reread its state, queue again), which costs a
// session that was not behind one read.
func (l *Loader) groupAcked(ctx context.Context, op *loadOp, ack pubAck, err error) error {
	total := uint64(op.msgCount())
	if err == nil && ack.Count != total {
		return fmt.Errorf("streams: loader: atomic batch of %d committed %d messages", total, ack.Count)
	}
	seq := ack.Seq - total
	for _, p := range op.parts {
		pack := ack
		if err == nil {
			seq += uint64(len(p.data))
			pack = pubAck{Seq: seq, Count: uint64(len(p.data))}
		}
		if perr := l.entriesAcked(ctx, p, pack, err); perr != nil {
			return perr
		}
	}
	return nil
}
