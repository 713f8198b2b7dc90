package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/a2a"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// Tokens with meaning in the agent-to-agent flow: a ping-pong reply of
// exactly ReplySkip ends the ping-pong, an announce reply of exactly
// AnnounceSkip posts nothing.
const (
	ReplySkip    = "REPLY_SKIP"
	AnnounceSkip = "ANNOUNCE_SKIP"
	// AnnounceMessage is the user message of the announce step.
	AnnounceMessage = "Agent-to-agent announce step."
)

// StepRunID is the run id of a continuation step ("pingpong:2" ⇒
// <primary>.pingpong-2); KV keys allow no ':'.
func StepRunID(primaryRunID, step string) string {
	return primaryRunID + "." + strings.ReplaceAll(step, ":", "-")
}

// afterRun delivers a human turn's reply to its channel and moves the A2A
// flow on after a run reached a terminal record. It is idempotent: a
// redelivered run calls it again and nothing doubles.
func (g *Gateway) afterRun(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	if err := g.afterChildRun(ctx, req, rec); err != nil {
		return err
	}
	if req.A2A == nil {
		return nil
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	if req.Step == "" {
		return g.startA2A(octx, req, rec)
	}
	return g.stepDone(octx, req, rec)
}

func (g *Gateway) startA2A(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	st := &a2a.State{TargetKey: req.SessionKey, TargetAgent: req.AgentID}
	if rec.Status != runs.OK || strings.TrimSpace(rec.Reply) == "" {
		st.Done = true // no reply: the flow stops silently
	} else {
		st.RoundOneReply = rec.Reply
		st.LatestReply = rec.Reply
		st.TargetChannel = "unknown"
		if t := g.resolveAnnounceTarget(ctx, req.SessionKey); t != nil && t.Channel != "" {
			st.TargetChannel = t.Channel
		}
	}
	cur, err := g.flows.Start(ctx, req.RunID, st)
	if err != nil {
		return err
	}
	return g.advance(ctx, req, req.RunID, cur)
}

// requesterSession is the store key of the requester's session. The
// handlers record the requester as they know it, which may be the alias
// ("main"); a step must run in the session that alias stands for, the one
// the requester's own tool calls resolve to, never in a session literally
// keyed "main".
func (g *Gateway) requesterSession(a *runqueue.A2A) string {
	return g.alias.StoreKey(a.RequesterKey, rules.AgentIDFromKey(a.RequesterKey))
}

// pingPongEnabled compares store keys: a requester known by its alias that
// sent into its own main session has no one to converse with.
func (g *Gateway) pingPongEnabled(a *runqueue.A2A, targetKey string) bool {
	return a.MaxPingPongTurns > 0 && a.RequesterKey != "" && g.requesterSession(a) != targetKey
}

// advance publishes the next step the state calls for. A step already
// published is deduped by its Nats-Msg-Id, and its record by Create.
func (g *Gateway) advance(ctx context.Context, req *runqueue.Request, primary string, st *a2a.State) error {
	if st.Done {
		return nil
	}
	a := req.A2A
	if g.pingPongEnabled(a, st.TargetKey) && !st.PingPongDone && st.Turn < a.MaxPingPongTurns {
		return g.publishStep(ctx, req, primary, st, "pingpong:"+strconv.Itoa(st.Turn+1))
	}
	return g.publishStep(ctx, req, primary, st, "announce")
}

func (g *Gateway) stepDone(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	primary := req.ParentRun
	reply := ""
	if rec.Status == runs.OK {
		reply = strings.TrimSpace(rec.Reply)
	}
	if n, ok := strings.CutPrefix(req.Step, "pingpong:"); ok {
		turn, err := strconv.Atoi(n)
		if err != nil {
			return nil
		}
		st, err := g.flows.Update(ctx, primary, func(st *a2a.State) bool {
			if st.Done || st.PingPongDone || st.Turn >= turn {
				return false
			}
			st.Turn = turn
			if reply == "" || reply == ReplySkip {
				st.PingPongDone = true
			} else {
				st.LatestReply = reply
			}
			return true
		})
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Turn != turn {
			return nil // a newer turn moved on already
		}
		return g.advance(ctx, req, primary, st)
	}
	if req.Step != "announce" {
		return nil
	}
	st, err := g.flows.Get(ctx, primary)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Done {
		return nil
	}
	delivered := false
	if reply != "" && reply != AnnounceSkip {
		t := g.resolveAnnounceTarget(ctx, st.TargetKey)
		allowed := false
		if t != nil && t.Channel != "" && t.To != "" {
			if allowed, err = g.deliveryAllowed(ctx, st.TargetKey, t.Channel); err != nil {
				return err // retried on redelivery
			}
		}
		if allowed {
			masked, _ := g.redact.ToolPayload(reply) // leaves the bus: masked like a tool payload
			d := deliveries.Delivery{
				Channel: t.Channel, To: t.To, AccountID: t.AccountID, ThreadID: t.ThreadID,
				Message: masked, SessionKey: st.TargetKey, RunID: primary,
			}
			if err := g.deliver.Publish(ctx, d, primary+":announce"); err != nil {
				return err // retried on redelivery; the msg id dedupes
			}
			delivered = true
		} else {
			g.log.Info("a2a announce: no delivery route, or the send policy denies it", "run", primary, "session", st.TargetKey)
		}
	}
	_, err = g.flows.Update(ctx, primary, func(st *a2a.State) bool {
		if st.Done {
			return false
		}
		st.Done, st.Delivered = true, delivered
		return true
	})
	return err
}

// publishStep records and queues one continuation run.
func (g *Gateway) publishStep(ctx context.Context, req *runqueue.Request, primary string, st *a2a.State, step string) error {
	a := req.A2A
	targetAgent := st.TargetAgent
	requesterKey := g.requesterSession(a)
	requesterAgent := rules.AgentIDFromKey(requesterKey)
	secs := int((a.AnnounceTimeoutMs + 999) / 1000)
	if secs <= 0 {
		secs = 30
	}
	sr := &runqueue.Request{
		RunID:          StepRunID(primary, step),
		TimeoutSeconds: secs,
		Lane:           "nested",
		ChainID:        req.ChainID,
		Hop:            req.Hop,
		A2A:            a,
		Step:           step,
		ParentRun:      primary,
		CreatedAt:      time.Now().UnixMilli(),
	}
	var source, sourceChannel string
	if n, ok := strings.CutPrefix(step, "pingpong:"); ok {
		turn, _ := strconv.Atoi(n)
		requesterSpeaks := turn%2 == 1
		role := "Agent 2 (target)"
		if requesterSpeaks {
			role = "Agent 1 (requester)"
			sr.SessionKey, sr.AgentID = requesterKey, requesterAgent
			source, sourceChannel = st.TargetKey, st.TargetChannel
		} else {
			sr.SessionKey, sr.AgentID = st.TargetKey, targetAgent
			source, sourceChannel = a.RequesterKey, a.RequesterChannel
		}
		sr.Message = st.LatestReply
		sr.ExtraSystemPrompt = joinLines(
			"Agent-to-agent reply step:",
			"Current agent: "+role+".",
			fmt.Sprintf("Turn %d of %d.", turn, a.MaxPingPongTurns),
			sessionLines(a, st),
			`If you want to stop the ping-pong, reply exactly "`+ReplySkip+`".`,
		)
	} else {
		sr.SessionKey, sr.AgentID = st.TargetKey, targetAgent
		source, sourceChannel = a.RequesterKey, a.RequesterChannel
		sr.Message = AnnounceMessage
		r1 := "Round 1 reply: (not available)."
		if st.RoundOneReply != "" {
			r1 = "Round 1 reply: " + st.RoundOneReply
		}
		latest := "Latest reply: (not available)."
		if st.LatestReply != "" {
			latest = "Latest reply: " + st.LatestReply
		}
		sr.ExtraSystemPrompt = joinLines(
			"Agent-to-agent announce step:",
			sessionLines(a, st),
			"Original request: "+a.OriginalMessage,
			r1,
			latest,
			`If you want to remain silent, reply exactly "`+AnnounceSkip+`".`,
			"Any other reply will be posted to the target channel.",
			"After this reply, the agent-to-agent conversation is over.",
		)
	}
	if source != "" {
		sr.Provenance = &runqueue.Provenance{
			Kind: "inter_session", SourceSessionKey: source,
			SourceChannel: sourceChannel, SourceTool: "sessions_send",
		}
	}
	sr.Prompt = AnnotateInterSession(sr.Message, sr.Provenance)

	sr.Recorded = true
	if err := g.runs.RecordPending(ctx, newRecord(sr)); err != nil {
		return fmt.Errorf("record step %s: %w", sr.RunID, err)
	}
	return g.queue.Publish(ctx, sr)
}

// sessionLines are the requester/target session and channel lines; absent
// ones are skipped.
func sessionLines(a *runqueue.A2A, st *a2a.State) string {
	display := a.TargetDisplayKey
	if display == "" {
		display = st.TargetKey
	}
	var lines []string
	if a.RequesterKey != "" {
		lines = append(lines, "Agent 1 (requester) session: "+a.RequesterKey+".")
	}
	if a.RequesterChannel != "" {
		lines = append(lines, "Agent 1 (requester) channel: "+a.RequesterChannel+".")
	}
	lines = append(lines, "Agent 2 (target) session: "+display+".")
	if st.TargetChannel != "" {
		lines = append(lines, "Agent 2 (target) channel: "+st.TargetChannel+".")
	}
	return strings.Join(lines, "\n")
}

func joinLines(lines ...string) string {
	out := lines[:0]
	for _, l := range lines {
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// AnnotateInterSession prefixes body with the inter-session marker of p
// (rules.AnnotateInterSession); nil provenance leaves body as is.
func AnnotateInterSession(body string, p *runqueue.Provenance) string {
	if p == nil {
		return body
	}
	return rules.AnnotateInterSession(body, p.SourceSessionKey, p.SourceChannel, p.SourceTool)
}
