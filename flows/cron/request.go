package cron

import (
	"time"

	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// runsRequest is one tick's run, before it is a run request.
type runsRequest struct {
	job     *cronjobs.Job
	runID   string
	at      time.Time
	mainKey string
}

// build is the run request: an isolated turn in a fresh run session, its
// prompt prefixed [cron:<jobId> <name>] as OpenClaw does, its reply
// delivered to route; or a system event into the agent's main session,
// "System: [time] text" as OpenClaw's heartbeat prompt carries one. It
// returns the route the reply goes to (nil: none).
func (r *runsRequest) build(route *cronjobs.Delivery) (*runqueue.Request, *cronjobs.Delivery) {
	j := r.job
	req := &runqueue.Request{
		RunID: r.runID, AgentID: j.AgentID, Lane: lane, ChainID: r.runID, CreatedAt: r.at.UnixMilli(),
		TimeoutSeconds: j.Payload.TimeoutSeconds,
		Provenance:     &runqueue.Provenance{Kind: "internal_system", SourceTool: "cron"},
	}
	if j.SessionTarget == TargetMain {
		req.SessionKey = r.mainKey
		req.Message = j.Payload.Text
		req.Prompt = "System: [" + r.at.UTC().Format(time.RFC3339) + "] " + j.Payload.Text
		return req, nil
	}
	req.SessionKey = RunSessionKey(j, r.runID)
	req.Message = j.Payload.Message
	req.Prompt = "[cron:" + j.ID + " " + trimName(j.Name) + "] " + j.Payload.Message
	if route != nil {
		req.ReplyTo = &runqueue.Route{Channel: route.Channel, To: route.To}
	}
	return req, route
}
