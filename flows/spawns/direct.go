package spawns

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// Stores are what Spawn writes to.
type Stores struct {
	Registry *subagents.Registry
	Sessions *sessions.Store
	Queue    *runqueue.Queue
	Runs     *runs.Records
}

// Child says what Spawn spawns.
type Child struct {
	Requester      string // requester (and controller) session key
	Agent          string // the child's agent id
	Task           string
	Label          string
	TimeoutSeconds int    // runTimeoutSeconds (0: none)
	Cleanup        string // delete | keep (default keep)
	// SkipQueue stops after the registry record (a crash at the commit
	// point): the sweep must finish the spawn.
	SkipQueue bool
	Origin    *subagents.Origin
}

var n atomic.Int64

// Spawn performs the writes of a sub-agent spawn as the shared contract
// defines them (registry record with the run request, then the child's
// session entry and its run), without the sessions_spawn tool's checks: for
// `sessionbus bench` and the gateway's tests, which seed children without
// depending on the tool.
// It returns the registry record.
func Spawn(ctx context.Context, s Stores, c Child) (*subagents.Record, error) {
	i := n.Add(1)
	stamp := time.Now().UnixNano()
	key := fmt.Sprintf("agent:%s:subagent:t%d-%d", c.Agent, stamp, i)
	runID := fmt.Sprintf("sub-%d-%d", stamp, i)
	now := time.Now().UnixMilli()
	cleanup := c.Cleanup
	if cleanup == "" {
		cleanup = "keep"
	}
	msg := "[Subagent Task]: " + c.Task
	req := &runqueue.Request{
		RunID: runID, SessionKey: key, AgentID: c.Agent, Message: msg, Prompt: msg,
		Lane: "subagent", ChainID: runID, CreatedAt: now,
	}
	rec := &subagents.Record{
		RunID: runID, ChildSessionKey: key, ChildSessionID: sessions.NewID(), ChildAgentID: c.Agent,
		ControllerSessionKey: c.Requester, RequesterSessionKey: c.Requester, RequesterOrigin: c.Origin,
		Task: c.Task, Label: c.Label, Cleanup: cleanup, SpawnMode: "run", Runtime: "subagent",
		Depth: 1, RunTimeoutSeconds: c.TimeoutSeconds, ExpectsCompletion: true, CreatedAt: now,
		Request: req,
	}
	if _, err := s.Registry.Create(ctx, rec); err != nil {
		return nil, err
	}
	if c.SkipQueue {
		return rec, nil
	}
	depth := 1
	if _, err := s.Sessions.Create(ctx, &sessions.Entry{
		Key: key, AgentID: c.Agent, SessionID: rec.ChildSessionID, CreatedAt: now, UpdatedAt: now,
		SpawnedBy: c.Requester, SpawnDepth: &depth, Label: c.Label,
	}); err != nil && !errors.Is(err, sessions.ErrExists) {
		return nil, err
	}
	q := *req
	if err := submit.Run(ctx, s.Queue, s.Runs, &q, &runs.Record{
		RunID: runID, SessionKey: key, AgentID: c.Agent, Status: runs.Pending, CreatedAt: now, ChainID: runID,
	}); err != nil {
		return nil, err
	}
	return rec, nil
}
