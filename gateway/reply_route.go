package gateway

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// deliverReply publishes the reply of a finished run that names a route
// (req.ReplyTo) to sb.deliver.<channel>: what a channel adapter sends to
// the human. Only an ok run with a reply delivers, and only when the send
// policy allows it; a reply of exactly NO_REPLY or ANNOUNCE_SKIP is silence. The message id (run id + ":reply")
// makes a redelivered run's second publish a no-op.
func (g *Gateway) deliverReply(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	to := req.ReplyTo
	if to == nil || to.Channel == "" || rec.Status != runs.OK {
		return nil
	}
	reply := strings.TrimSpace(rec.Reply)
	if reply == "" || completion.Silent(reply) {
		return nil
	}
	if ok, err := g.deliveryAllowed(ctx, req.SessionKey, to.Channel); !ok {
		return err
	}
	// what leaves the bus for a channel is masked like a tool payload
	reply, _ = g.redact.ToolPayload(reply)
	return g.deliver.Publish(ctx, deliveries.Delivery{
		Channel: to.Channel, To: to.To, AccountID: to.AccountID, ThreadID: to.ThreadID,
		Message: reply, SessionKey: req.SessionKey, RunID: req.RunID,
	}, req.RunID+":reply")
}
