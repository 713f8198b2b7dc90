package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
)

// ThinkingLevels are OpenClaw's think levels, in the order the errors list
// them: what sessions_spawn may give a child and session_status may set.
// sessionbus has no model catalog saying which levels a model supports, so
// every model accepts them all.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// OpenClaw's texts of the checks.
const (
	errSpawnLightContextACP = "lightContext is only supported for runtime='subagent'."
	errSpawnForkACP         = `context="fork" is only supported for runtime="subagent".`
	errSpawnSessionNoThread = `mode="session" requires thread=true so the subagent can stay bound to a thread.`
	errSpawnRequireAgentID  = "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids."
	errSpawnSandboxInherit  = "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime."
	errSpawnSandboxRequire  = `sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".`
)

// check runs every check before anything is written: OpenClaw's, in its
// order (runtime, target, mode, depth, fan-out, requireAgentId, allowlist,
// sandbox, model and thinking), then sessionbus's own. A refusal is the
// result to reply (a returned error) or a thrown error; nil and nil let
// the spawn go ahead, with the decisions recorded in s.
func (s *spawn) check(ctx context.Context) (*spawnResult, error) {
	if res, err := s.checkRuntime(); res != nil || err != nil {
		return res, err
	}
	if err := s.readRequester(ctx); err != nil {
		return nil, err
	}
	if res := s.checkTarget(); res != nil {
		return res, nil
	}
	if res := s.checkAllowed(); res != nil {
		return res, nil
	}
	if res := s.checkModel(); res != nil {
		return res, nil
	}
	return s.checkOwn(), nil
}

// checkRuntime refuses the parameters the chosen runtime does not take.
func (s *spawn) checkRuntime() (*spawnResult, error) {
	sp := &s.sp
	s.acp = sp.runtime == runtimeACP
	if !s.acp {
		if sp.streamTo != "" {
			return spawnFail("error", "streamTo is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
		if sp.resumeSessionID != "" {
			return spawnFail("error", "resumeSessionId is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
		if sp.cwd != "" {
			return spawnFail("error", "cwd is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
		return nil, nil
	}
	if sp.lightContext {
		return nil, badRequest(errSpawnLightContextACP)
	}
	if sp.context == contextFork {
		return nil, badRequest(errSpawnForkACP)
	}
	if sp.hasAttachments {
		return spawnFail("error", "attachments are not supported for runtime=acp; use runtime=subagent or omit attachments"), nil
	}
	return nil, nil
}

// checkTarget picks the child's agent (an explicit agent id is checked,
// never repaired) and its mode.
func (s *spawn) checkTarget() *spawnResult {
	sp := &s.sp
	s.requesterAgent = s.r.k.AgentID
	s.target = s.requesterAgent
	if sp.hasAgent {
		if !rules.ValidAgentID(sp.agentID) {
			return spawnFail("error", fmt.Sprintf("Invalid agentId %q. Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.", sp.agentID))
		}
		s.target = strings.ToLower(sp.agentID)
	}
	s.mode = sp.mode
	if !sp.hasMode {
		s.mode = spawnModeRun
		if sp.thread {
			s.mode = spawnModeSession
		}
	}
	if s.mode == spawnModeSession && !sp.thread {
		return spawnFail("error", errSpawnSessionNoThread)
	}
	return nil
}

// checkAllowed applies the requester agent's subagents settings (depth,
// active children, requireAgentId, allowAgents) and the sandbox rules.
func (s *spawn) checkAllowed() *spawnResult {
	d, r := s.d, s.r
	s.settings = d.Config.SubagentsFor(s.requesterAgent)
	s.callerDepth = d.spawnDepthOf(r.key)
	s.maxDepth = s.settings.MaxSpawnDepth
	if s.callerDepth >= s.maxDepth {
		return spawnFail(rules.StatusForbidden, fmt.Sprintf("sessions_spawn is not allowed at this depth (current depth: %d, max: %d)", s.callerDepth, s.maxDepth))
	}
	// fan-out: active children only
	if n, limit := d.Children.ActiveChildren(r.key), s.settings.MaxChildrenPerAgent; n >= limit {
		return spawnFail(rules.StatusForbidden, fmt.Sprintf("sessions_spawn has reached max active children for this session (%d/%d)", n, limit))
	}
	if s.settings.RequireAgentID != nil && *s.settings.RequireAgentID && !s.sp.hasAgent {
		return spawnFail(rules.StatusForbidden, errSpawnRequireAgentID)
	}
	// the allowlist is for another agent only
	if s.target != s.requesterAgent {
		if msg := spawnAllowlistDenial(s.settings.AllowAgents, s.target); msg != "" {
			return spawnFail(rules.StatusForbidden, msg)
		}
	}
	childSandboxed := d.Config.SandboxedSession(s.target, false)
	requesterSandboxed := r.sandboxed || d.Config.SandboxedSession(s.requesterAgent, r.key == r.alias.MainSessionKey(s.requesterAgent))
	if requesterSandboxed && !childSandboxed {
		return spawnFail(rules.StatusForbidden, errSpawnSandboxInherit)
	}
	if s.sp.sandbox == sandboxRequire && !childSandboxed {
		return spawnFail(rules.StatusForbidden, errSpawnSandboxRequire)
	}
	return nil
}

// readRequester reads the requester's session: from the index, else from
// the bucket, since a session made a moment ago (an inbound message's, on
// another worker) may not be in this worker's index yet, and without it a
// spawn would find no route (thread=true: "requires an active channel
// conversation context") and no model settings to inherit.
func (s *spawn) readRequester(ctx context.Context) error {
	if s.reqEntry = s.d.Index.Get(s.r.key); s.reqEntry != nil {
		return nil
	}
	e, _, err := s.d.Store.Get(ctx, s.r.key)
	switch {
	case err == nil:
		s.reqEntry = e
	case !errors.Is(err, sessions.ErrNotFound):
		return fmt.Errorf("read the requester's session %s: %w", s.r.key, err)
	}
	return nil
}

// checkModel plans the child's model and thinking level: the parameter,
// else the target agent's subagents settings, else the requester's own
// session's; a thinking level must be one of ThinkingLevels.
func (s *spawn) checkModel() *spawnResult {
	sp := &s.sp
	tgtSettings := s.d.Config.SubagentsFor(s.target)
	s.model = rules.FirstNonEmpty(sp.model, tgtSettings.Model)
	if s.model != "" && !strings.EqualFold(s.model, "default") {
		// the child's entry takes the model as session_status would patch
		// it: an unknown or disallowed one refuses the spawn before any write
		if _, refusal := s.d.modelRef(s.target, s.d.defaultProvider(s.target, nil), s.model); refusal != "" {
			return spawnFail("error", refusal)
		}
	}
	thinkingRaw := rules.FirstNonEmpty(sp.thinking, tgtSettings.Thinking)
	if e := s.reqEntry; e != nil {
		s.model = rules.FirstNonEmpty(s.model, e.Rares().ModelOverride, e.Model)
		thinkingRaw = rules.FirstNonEmpty(thinkingRaw, e.Rares().ThinkingLevel)
	}
	if thinkingRaw != "" {
		var ok bool
		if s.thinking, ok = normalizeThinking(thinkingRaw); !ok {
			return spawnFail("error", fmt.Sprintf("Invalid thinking level %q. Use one of: %s.", thinkingRaw, strings.Join(ThinkingLevels, ", ")))
		}
	}
	return nil
}

// checkOwn is the thread binding's checks (OpenClaw's last), then
// sessionbus's own: the context (fork needs the requester's own agent), an
// acp child's harness, the attachments' content; and the cleanup a
// session-mode child keeps.
func (s *spawn) checkOwn() *spawnResult {
	sp := &s.sp
	if s.reqEntry != nil {
		s.origin = routeOf(s.reqEntry)
	}
	if res := s.checkThread(); res != nil {
		return res
	}
	s.context = sp.context
	if !sp.hasContext {
		s.context = contextIsolated
		if sp.thread {
			s.context = s.threadContext()
		}
	}
	if s.context == contextFork && s.acp {
		s.context = contextIsolated // a thread-bound acp spawn: fork was only the default
	}
	if s.context == contextFork && s.target != s.requesterAgent {
		return spawnFail("error", fmt.Sprintf(`context="fork" needs the requester's own agent (%s); got agentId=%s. Use context="isolated" to spawn another agent.`, s.requesterAgent, s.target))
	}
	if s.acp {
		if a := s.d.Config.Agent(s.target); a == nil || !strings.EqualFold(strings.TrimSpace(a.Runtime), "exec") {
			return spawnFail("error", fmt.Sprintf("runtime=acp runs an external harness: agent %s needs runtime: exec in agents.list (with exec.command naming the harness)", s.target))
		}
	}
	total, msg := checkAttachments(sp.attachments)
	if msg != "" {
		return spawnFail("error", msg)
	}
	s.attachBytes = total
	s.cleanup = sp.cleanup
	if s.mode == spawnModeSession {
		s.cleanup = cleanupKeep
	}
	return nil
}

func normalizeThinking(s string) (string, bool) {
	v := strings.ToLower(strings.TrimSpace(s))
	return v, slices.Contains(ThinkingLevels, v)
}

// spawnAllowlistDenial checks the target agent against the requester
// agent's allowAgents ("*" allows any): "" when allowed.
func spawnAllowlistDenial(allow []string, target string) string {
	var ids []string
	for _, a := range allow {
		t := strings.TrimSpace(a)
		if t == "*" {
			return ""
		}
		if t == "" {
			continue
		}
		if id := rules.NormalizeAgentID(t); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if slices.Contains(ids, target) {
		return ""
	}
	list := "none"
	if len(ids) > 0 {
		list = strings.Join(ids, ", ")
	}
	return fmt.Sprintf("agentId is not allowed for sessions_spawn (allowed: %s)", list)
}

// spawnDepthOf is the caller's depth: its entry's spawnDepth, else one
// more than its spawner's depth (cycle-safe), else the number of
// `:subagent:` segments in its key. Bare keys are also tried under the
// default agent.
func (d *Deps) spawnDepthOf(key string) int {
	seen := map[string]bool{}
	var depth func(k string) (int, bool)
	depth = func(k string) (int, bool) {
		if seen[k] {
			return 0, false
		}
		seen[k] = true
		e := d.Index.Get(k)
		if e == nil && !strings.HasPrefix(strings.ToLower(k), "agent:") {
			e = d.Index.Get("agent:" + rules.DefaultAgentID + ":" + k)
		}
		if e != nil && e.SpawnDepth != nil && *e.SpawnDepth >= 0 {
			return *e.SpawnDepth, true
		}
		if e != nil && e.SpawnedBy != "" {
			if pd, ok := depth(e.SpawnedBy); ok {
				return pd + 1, true
			}
		}
		return rules.SubagentDepthFromKey(k), true
	}
	n, _ := depth(key)
	return n
}

// routeOf is a session's channel route, nil when it has none.
func routeOf(e *sessions.Entry) *subagents.Origin {
	o := &subagents.Origin{Channel: e.LastChannel, To: e.LastTo, AccountID: e.LastAccountID, ThreadID: e.LastThreadID()}
	if dc := e.DeliveryContext; dc != nil && dc.Channel != "" {
		o = &subagents.Origin{Channel: dc.Channel, To: dc.To, AccountID: dc.AccountID, ThreadID: dc.ThreadID}
	}
	if o.Channel == "" {
		return nil
	}
	return o
}
