package handlers

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// sessions_spawn creates a sub-agent session and queues its first run,
// documented in docs/tools.md and docs/subagents.md ("Spawn", "Creation
// design"). One call goes through the steps of a spawn value: read the
// parameters (spawn_params.go), check them (spawn_checks.go), plan the
// child's ids and record (plan and record below), write it
// (spawn_commit.go, with the transcript seeded by spawn_seed.go) and reply.

const (
	spawnToolName    = "sessions_spawn"
	spawnLane        = "subagent"
	runtimeSubagent  = "subagent"
	runtimeACP       = "acp"
	spawnModeRun     = "run"
	spawnModeSession = "session"
	cleanupDelete    = "delete"
	cleanupKeep      = "keep"
	sandboxInherit   = "inherit"
	sandboxRequire   = "require"
	contextFork      = "fork"
	contextIsolated  = "isolated"
)

// OpenClaw's notes of an accepted spawn.
const (
	// SubagentSpawnAcceptedNote is the note of an accepted run-mode spawn
	// (none for cron requesters).
	SubagentSpawnAcceptedNote = "Auto-announce is push-based. After spawning children, do NOT call sessions_list, sessions_history, exec sleep, or any polling tool. Wait for completion events to arrive as user messages, track expected child session keys, and only send your final answer after ALL expected completions arrive. If a child completion event arrives AFTER your final answer, reply ONLY with NO_REPLY."
	spawnSessionModeNote      = "thread-bound session stays active after this task; continue in-thread for follow-ups."
)

// spawnResult is every result shape of sessions_spawn.
type spawnResult = schema.SessionsSpawnResult

func spawnFail(status, msg string) *spawnResult { return &spawnResult{Status: status, Error: msg} }

// spawn is one sessions_spawn call as it goes through its steps; each
// step fills the fields the later ones read.
type spawn struct {
	d  *Deps
	r  *requester
	sp spawnParams

	// decided by check
	acp                    bool
	requesterAgent, target string
	mode, context, cleanup string
	settings               config.Subagents // the requester agent's
	callerDepth, maxDepth  int
	reqEntry               *sessions.Entry // the requester's session; nil if it has none
	model, thinking        string
	origin                 *subagents.Origin
	attachBytes            int
	threadPolicy           *config.ThreadBindingPolicy // a thread-bound spawn's channel's

	// planned by plan and record
	childUUID, runID, sessionID, childKey string
	childDepth                            int
	role                                  string
	attach                                *spawnAttachSummary
	rec                                   *subagents.Record

	writes spawnWrites // sent and awaited by commit
}

func sessionsSpawn(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	sp, err := readSpawnParams(p)
	if err != nil {
		return nil, err
	}
	s := &spawn{d: d, r: r, sp: sp}
	if res, err := s.check(ctx); err != nil {
		return nil, err
	} else if res != nil {
		return res, nil
	}
	s.plan()
	if s.sp.idempotencyKey != "" {
		if res := s.retried(ctx); res != nil {
			return res, nil
		}
	}
	// a retry (above) queues nothing; this spawn queues the child's run
	if err := d.admitRun(r.key); err != nil {
		return nil, err
	}
	s.rec = s.record()
	return s.commit(ctx)
}

// plan names the child: its ids (random, or derived from the caller and
// idempotencyKey, so a retry computes the same ones), key, depth and role,
// and the summary of its attachments.
func (s *spawn) plan() {
	s.childUUID, s.runID, s.sessionID = sessions.NewID(), sessions.NewID(), sessions.NewID()
	if key := s.sp.idempotencyKey; key != "" {
		s.childUUID = bus.DerivedUUID("sessionbus/sessions_spawn/child", s.r.key, key)
		s.runID = bus.DerivedUUID("sessionbus/sessions_spawn/run", s.r.key, key)
		s.sessionID = bus.DerivedUUID("sessionbus/sessions_spawn/session", s.r.key, key)
	}
	kindSeg := "subagent"
	if s.acp {
		kindSeg = "acp"
	}
	s.childKey = "agent:" + s.target + ":" + kindSeg + ":" + s.childUUID
	s.childDepth = s.callerDepth + 1
	s.role = rules.RoleForDepth(s.childDepth, s.maxDepth)
	if s.sp.hasAttachments {
		s.attach = attachSummary(s.sp.attachments, s.attachBytes, s.sp.mountPath, s.childUUID)
	}
}

// retried answers a retry (an idempotencyKey whose child is registered
// already) with the first call's record, writing nothing; nil when this
// is no retry.
func (s *spawn) retried(ctx context.Context) *spawnResult {
	first, _, err := s.d.Subagents.Get(ctx, s.childKey)
	if err == nil {
		return s.idempotent(first)
	}
	if !errors.Is(err, subagents.ErrNotFound) {
		return spawnFail("error", "sessions_spawn: read the child registry: "+err.Error())
	}
	return nil
}

// idempotent answers a retried spawn with the first call's ids.
func (s *spawn) idempotent(first *subagents.Record) *spawnResult {
	if first.IdempotencyKey != s.sp.idempotencyKey {
		return spawnFail("error", "sessions_spawn: idempotencyKey collides with another child; use another key")
	}
	return s.accepted(first)
}

// record is the child's registry record, its run request inside.
func (s *spawn) record() *subagents.Record {
	d, r, sp := s.d, s.r, &s.sp
	now := d.Now().UnixMilli()
	message := spawnMessage(s.childDepth, s.maxDepth, s.mode, sp.task)
	runTimeout := s.settings.RunTimeoutSeconds
	if sp.hasTimeout {
		runTimeout = sp.runTimeout
	}
	req := &runqueue.Request{
		RunID:             s.runID,
		SessionKey:        s.childKey,
		AgentID:           s.target,
		Message:           message,
		Prompt:            message,
		ExtraSystemPrompt: s.systemPrompt(),
		Provenance:        &runqueue.Provenance{Kind: provenanceInterSession, SourceSessionKey: r.key, SourceChannel: d.requesterChannel(r), SourceTool: spawnToolName},
		Lane:              spawnLane,
		TimeoutSeconds:    runTimeout,
		ChainID:           s.runID,
		CreatedAt:         now,
		Recorded:          true,
	}
	return &subagents.Record{
		RunID: s.runID, ChildSessionKey: s.childKey, ChildSessionID: s.sessionID, ChildAgentID: s.target,
		ControllerSessionKey: r.key, RequesterSessionKey: r.key, RequesterDisplayKey: r.alias.Display(r.key),
		RequesterOrigin: s.origin, Task: sp.task, Label: sp.label, Cleanup: s.cleanup, SpawnMode: s.mode,
		Runtime: sp.runtime, Model: s.model, Thinking: s.thinking, Depth: s.childDepth, RunTimeoutSeconds: runTimeout,
		IdempotencyKey: sp.idempotencyKey, ExpectsCompletion: true, CreatedAt: now, Request: req,
		SubagentRole: s.role, SubagentControlScope: rules.ControlScopeFor(s.role), SpawnContext: s.context, Thread: sp.thread,
		ThreadIdleTimeoutMs: s.threadPolicy.IdleMs(), ThreadMaxAgeMs: s.threadPolicy.MaxAgeMs(),
	}
}

// accepted is the result of a spawn whose registry record is rec: this
// call's, or the first call's of a retry.
func (s *spawn) accepted(rec *subagents.Record) *spawnResult {
	res := &spawnResult{Status: "accepted", ChildSessionKey: rec.ChildSessionKey, RunID: rec.RunID, Mode: rec.SpawnMode, Attachments: s.attach}
	switch {
	case rec.SpawnMode == spawnModeSession:
		res.Note = spawnSessionModeNote
	case !rules.IsCronKey(rec.RequesterSessionKey):
		res.Note = SubagentSpawnAcceptedNote
	}
	if rec.Model != "" {
		applied := true
		res.ModelApplied = &applied
	}
	return res
}

// reply is the accepted result of this call's spawn, encoded here when
// redactResult would mask nothing in it: its strings are checked the way
// redactResult does, but its constant note only once per redactor (the
// note is most of the reply's text, and scanning it took most of
// redactResult's time on every spawn). Redaction masks within one string,
// so the strings are checked apart from the note (each on a line of its
// own, as redactResult joins them). With attachments, or anything that
// may mask, the result goes to redactResult whole.
func (s *spawn) reply(rec *subagents.Record) any {
	res := s.accepted(rec)
	d := s.d
	if res.Attachments != nil || res.Error != "" || d.mayMaskConst(res.Note) ||
		d.Redactor.MayMask(res.Status+"\n"+res.ChildSessionKey+"\n"+res.RunID+"\n"+res.Mode) {
		return res
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	return checkedResult(b)
}
