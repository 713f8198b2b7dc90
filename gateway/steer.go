package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Steering a running turn (messages.queue steer, queue and steer-backlog;
// /steer and /tell). The worker that takes the human message, whichever
// it is, appends it to the running run's record (its Inbox) with a
// compare-and-set that holds only while the run has not ended; the
// gateway running the turn reads the record at each boundary of the turn:
// before each model request (Drain) and before each tool call (Pending).
// A message it takes is written to the transcript as the run's part
// "steer.<id>" between the prompt and the reply, then given to the model.
// The record is the durable copy: a gateway that dies between the steer
// and the boundary leaves it there, and the redelivered attempt gives it
// to the model before its first request, once (its transcript entry, if
// the first attempt wrote one, is not written again, and is kept out of
// the history the runtime gets, which ends at the prompt). A message the
// turn ended without (it came after the last boundary), and every
// steer-backlog message, runs as a follow-up turn of its own, queued when
// the run's outcome is recorded: that write is a compare-and-set too, so
// a message is either seen by it or refused by the worker, which then
// queues the follow-up itself.

// steerPart is the part name of an inbox message's transcript entry.
func steerPart(id string) string { return steerPartPrefix + id }

const steerPartPrefix = "steer."

// steering is a run's runtime.Steering.
type steering struct {
	r         *run
	mu        sync.Mutex
	delivered map[string]bool // inbox messages this attempt gave the model
	written   map[string]bool // inbox messages with a transcript entry
}

// newSteering is the run's steering, nil when its agent's turns cannot be
// steered. mine is what earlier attempts wrote.
func (r *run) newSteering(mine []transcripts.Entry) *steering {
	if !r.g.cfg.Steerable(r.req.AgentID) {
		return nil
	}
	s := &steering{r: r, delivered: map[string]bool{}, written: map[string]bool{}}
	for _, m := range r.rec.Inbox {
		if hasPart(mine, r.req.RunID, steerPart(m.ID)) {
			s.written[m.ID] = true
		}
	}
	return s
}

// steered reports an inbox message that goes into the running turn.
func steered(m runs.InboxMessage) bool {
	switch m.Mode {
	case config.QueueSteer, config.QueueQueue, config.QueueSteerBacklog:
		return true
	}
	return false
}

// waiting is the inbox messages of rec for the turn not given yet.
func (s *steering) waiting(rec *runs.Record) []runs.InboxMessage {
	var out []runs.InboxMessage
	for _, m := range rec.Inbox {
		if steered(m) && !s.delivered[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// read is the run's record as it is now (nil: unreadable, nothing waits).
func (s *steering) read(ctx context.Context) *runs.Record {
	rec, _, err := s.r.g.runs.Get(ctx, s.r.req.RunID)
	if err != nil {
		s.r.g.log.Debug("gateway: reading steered messages", "run", s.r.req.RunID, "err", err)
		return nil
	}
	return rec
}

// Pending reports a steered message waiting for the next model request.
func (s *steering) Pending(ctx context.Context) bool {
	rec := s.read(ctx)
	if rec == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting(rec)) > 0
}

// Drain writes the messages steered in since the last boundary to the
// transcript and returns them for the model: all of them, or in queue
// mode (OpenClaw's legacy one-at-a-time steering) the oldest.
func (s *steering) Drain(ctx context.Context) []string {
	rec := s.read(ctx)
	if rec == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := s.waiting(rec)
	for i, m := range msgs {
		if m.Mode == config.QueueQueue {
			msgs = msgs[:max(i, 1)]
			break
		}
	}
	var out []string
	for _, m := range msgs {
		if !s.written[m.ID] {
			if err := s.r.appendPart(ctx, steerPart(m.ID), s.entry(m), nil); err != nil {
				// the model still reads it; a later attempt would write it
				s.r.g.log.Warn("gateway: writing a steered message to the transcript", "run", s.r.req.RunID, "err", err)
			} else {
				s.written[m.ID] = true
			}
		}
		s.delivered[m.ID] = true
		out = append(out, m.Text)
	}
	return out
}

// entry is an inbox message as the run's transcript entry: the human's
// words as they came, marked as the run's part.
func (s *steering) entry(m runs.InboxMessage) []byte {
	user := map[string]any{"role": "user", "content": m.Text}
	if req := followupOf(m); req != nil && req.Provenance != nil {
		user["provenance"] = req.Provenance
	}
	user[runMarker] = marker{Run: s.r.req.RunID, Part: steerPart(m.ID)}
	data, _ := bus.Marshal(user)
	return data
}

// followupOf is the follow-up run request an inbox message carries.
func followupOf(m runs.InboxMessage) *runqueue.Request {
	if len(m.Followup) == 0 {
		return nil
	}
	var req runqueue.Request
	if json.Unmarshal(m.Followup, &req) != nil || req.RunID == "" || req.SessionKey == "" {
		return nil
	}
	return &req
}

// ownHistory is history without the run's own entries (an earlier
// attempt's prompt and steered messages): the runtime adds the prompt
// after it, and the steered messages come through Drain, once.
func (r *run) ownHistory(history []json.RawMessage) []json.RawMessage {
	if r.steer == nil {
		return history
	}
	out := history[:0:0]
	for _, h := range history {
		if strings.Contains(string(h), runMarker) && ownPart(h, r.req.RunID) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// ownPart reports the run's own prompt or a message steered into it: the
// entries the runtime is given another way. Its compaction (an entry it
// wrote before its prompt) stays: it is where the model's context starts.
func ownPart(data []byte, runID string) bool {
	var m struct {
		M *marker `json:"__sessionbus"`
	}
	if json.Unmarshal(data, &m) != nil || m.M == nil || m.M.Run != runID {
		return false
	}
	return m.M.Part == "prompt" || strings.HasPrefix(m.M.Part, steerPartPrefix)
}

// queueLeftovers queues, as turns of their own, the inbox messages the
// run's turn ended without and the steer-backlog ones; inbox is the
// record as its outcome was recorded. Their run ids are the workers', so
// a repeat (a redelivered run recording its outcome again) queues nothing
// twice.
func (r *run) queueLeftovers(ctx context.Context, inbox []runs.InboxMessage) {
	for _, m := range inbox {
		if !steered(m) {
			continue
		}
		taken := r.steer != nil && r.steer.taken(m.ID)
		if taken && m.Mode != config.QueueSteerBacklog {
			continue
		}
		req := followupOf(m)
		if req == nil {
			continue
		}
		if err := r.g.queueFollowup(ctx, req); err != nil {
			r.g.log.Error("gateway: queueing a steered message as its own turn failed", "run", r.req.RunID, "followup", req.RunID, "err", err)
		}
	}
}

// queueFollowup queues req once: a record that exists already was queued
// by an earlier attempt, and is published again only while SB_RUNS would
// still drop the repeat (its attempt may have died between the two).
func (g *Gateway) queueFollowup(ctx context.Context, req *runqueue.Request) error {
	req.Recorded = true
	rec := &runs.Record{RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID,
		Status: runs.Pending, CreatedAt: req.CreatedAt, ChainID: req.ChainID}
	err := g.runs.Create(ctx, rec)
	if errors.Is(err, runs.ErrExists) {
		first, _, gerr := g.runs.Get(ctx, req.RunID)
		if gerr != nil || first.Status != runs.Pending ||
			time.Since(time.UnixMilli(first.CreatedAt)) > runqueue.DedupeWindow-time.Minute {
			return gerr
		}
		err = nil
	}
	if err != nil {
		return err
	}
	return g.queue.Publish(ctx, req)
}

// leftoversOfEnded queues what a run whose outcome an earlier attempt
// recorded ended without, in case that attempt died before it did: the
// messages its transcript holds were taken.
func (r *run) leftoversOfEnded(ctx context.Context) {
	if !slices.ContainsFunc(r.rec.Inbox, steered) || r.rec.TranscriptAt == nil {
		return
	}
	at := *r.rec.TranscriptAt
	mine, err := r.g.tr.Read(ctx, r.enc, at, at+3+uint64(len(r.rec.Inbox)))
	if err != nil {
		r.g.log.Warn("gateway: reading an ended run's steered messages", "run", r.req.RunID, "err", err)
		return
	}
	r.steer = &steering{r: r, delivered: map[string]bool{}}
	for _, m := range r.rec.Inbox {
		if hasPart(mine, r.req.RunID, steerPart(m.ID)) {
			r.steer.delivered[m.ID] = true
		}
	}
	r.queueLeftovers(ctx, r.rec.Inbox)
}

// taken reports a message this attempt gave the model.
func (s *steering) taken(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered[id]
}
