package gateway

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// SilentReply is the reply with which an agent answers a human turn with
// nothing: no delivery is published for it (OpenClaw's NO_REPLY).
const SilentReply = "NO_REPLY"

// deliverReply publishes the reply of a run that asked for it
// (runqueue.Request.ReplyTo, a human turn from a channel adapter) to its
// route on <prefix>.deliver.<channel>. A run that failed, or replied
// nothing or SilentReply, delivers nothing. It is idempotent: the message
// id is the run's, so a redelivered run publishes once within the dedupe
// window, and a failed publish fails the run's handling, which is retried.
func (g *Gateway) deliverReply(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	rt := req.ReplyTo
	if rt == nil || rec.Status != runs.OK {
		return nil
	}
	reply := strings.TrimSpace(rec.Reply)
	if reply == "" || reply == SilentReply {
		return nil
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	return g.deliver.Publish(octx, deliveries.Delivery{
		Channel: rt.Channel, To: rt.To, AccountID: rt.AccountID, ThreadID: rt.ThreadID,
		Message: rec.Reply, SessionKey: req.SessionKey, RunID: req.RunID,
	}, req.RunID+":reply")
}
