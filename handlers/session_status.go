package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// session_status's thrown errors, OpenClaw's exact text.
const (
	errStatusA2ADisabled = "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."
	errStatusA2ADenied   = "Agent-to-agent session status denied by tools.agentToAgent.allow."
	errStatusSandboxTree = "Session status visibility is restricted to the current session tree."
)

// statusChangesLimit is how many signal-log events changesSince returns at
// most.
const statusChangesLimit = 200

// StateLog is what session_status reads of a session's signal log
// (streams/signals). Events are already in their tool projection
// (signals.Project), so an adapter over signals.Log is a field copy.
type StateLog interface {
	StateVersion(ctx context.Context, sessionKey string) (uint64, error)
	Since(ctx context.Context, sessionKey string, after uint64, limit int) (StateChanges, error)
}

// StateChanges is one changesSince read.
type StateChanges struct {
	Events                    []map[string]any `json:"events"`
	Truncated                 bool             `json:"truncated"`
	EarliestAvailableSequence uint64           `json:"earliestAvailableSequence"`
	HistoryGap                bool             `json:"historyGap"`
}

type routeOrigin struct {
	Provider  string `json:"provider,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

type routeActive struct {
	Channel   string `json:"channel,omitempty"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// routeContext is the `Route context` block and its details fields.
type routeContext struct {
	Origin          *routeOrigin              `json:"origin,omitempty"`
	Active          *routeActive              `json:"active,omitempty"`
	DeliveryContext *sessions.DeliveryContext `json:"deliveryContext,omitempty"`
}

func (rc routeContext) empty() bool {
	return rc.Origin == nil && rc.Active == nil && rc.DeliveryContext == nil
}

type statusResult struct {
	OK           bool          `json:"ok"`
	SessionKey   string        `json:"sessionKey"`
	ChangedModel bool          `json:"changedModel"`
	StateVersion uint64        `json:"stateVersion"`
	StateChanges *StateChanges `json:"stateChanges,omitempty"`
	Model        string        `json:"model,omitempty"`
	Provider     string        `json:"modelProvider,omitempty"`
	// ModelOverride is "provider/model" or null, only when model was given.
	ModelOverride json.RawMessage `json:"modelOverride,omitempty"`
	ThinkingLevel string          `json:"thinkingLevel,omitempty"`
	// Goal is the session's goal, a cleared one too (who cleared it,
	// when). JSON only: OpenClaw's status card does not show it.
	Goal *sessions.Goal `json:"goal,omitempty"`
	routeContext
	StatusText string `json:"statusText"`
}

type statusParams struct {
	ref          string
	model        string
	hasModel     bool
	thinking     string
	hasThinking  bool
	changesSince uint64
	hasChanges   bool
}

func readStatusParams(p rules.Params) (statusParams, error) {
	var sp statusParams
	var err error
	if sp.ref, _, err = p.String("sessionKey"); err != nil {
		return sp, err
	}
	if sp.ref != "" {
		if err := rules.ValidateSessionKeyInput(sp.ref); err != nil {
			return sp, err
		}
	}
	// model "" is a reset, so presence is read apart from the value
	if sp.hasModel = p.Present("model"); sp.hasModel {
		if sp.model, _, err = p.String("model"); err != nil {
			return sp, err
		}
	}
	if sp.hasThinking = p.Present("thinkingLevel"); sp.hasThinking {
		if sp.thinking, _, err = p.String("thinkingLevel"); err != nil {
			return sp, err
		}
	}
	n, has, err := p.NonNegativeInt("changesSince")
	if err != nil {
		return sp, err
	}
	sp.changesSince, sp.hasChanges = uint64(n), has
	return sp, nil
}

func sessionStatus(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	sp, err := readStatusParams(p)
	if err != nil {
		return nil, err
	}
	ref := sp.ref
	if ref == "" {
		ref = r.key
	}
	if ref == "" {
		return nil, badRequest("sessionKey required")
	}
	target, err := d.resolveStatusTarget(ctx, r, ref)
	if err != nil {
		return nil, err
	}
	e := target.entry
	out := &statusResult{OK: true, SessionKey: target.key}

	if sp.hasModel || sp.hasThinking {
		if e, err = d.applyStatusOverrides(ctx, r, target, sp, out); err != nil {
			return nil, err
		}
	}
	usage, version, changes, err := d.statusReads(ctx, target.key, e, sp)
	if err != nil {
		return nil, err
	}
	out.StateVersion, out.StateChanges = version, changes

	m := d.effectiveModel(e)
	out.Model, out.Provider = m.Model, m.Provider
	out.ThinkingLevel, out.Goal = e.Rares().ThinkingLevel, e.Rares().Goal
	out.routeContext = statusRoute(r, e)
	out.StatusText = d.statusText(r, e, m, usage, out)
	return out, nil
}

// resolveStatusTarget finds session_status's target (docs/tools.md,
// session_status, "Target"). The index is read without a barrier first, as resolveVisible does; only a miss or a denial syncs and decides
// again, so a session written a moment ago elsewhere is never refused.
func (d *Deps) resolveStatusTarget(ctx context.Context, r *requester, ref string) (resolved, error) {
	return decideSynced(ctx, d, func() (resolved, error) { return d.statusTarget(r, ref) })
}

func (d *Deps) statusTarget(r *requester, raw string) (resolved, error) {
	explicit := strings.HasPrefix(raw, "agent:")
	if explicit {
		if err := statusAgentAccess(r, rules.AgentIDFromKey(raw)); err != nil {
			return resolved{}, err
		}
		if err := d.statusGuard(r, raw); err != nil {
			return resolved{}, err
		}
	}
	// the requester's own agent first, so a bare key never reaches into
	// another agent's sessions
	key := d.statusLookup(r, raw)
	viaID := false
	if key == "" && rules.ShouldResolveAsSessionID(raw) {
		if e := d.selectSessionID(r, raw, func(e *sessions.Entry) bool {
			// with agent-to-agent off, another agent's session can never be
			// the answer, so it must not make the choice ambiguous either
			return r.a2a.Enabled || r.derived(e).agentID() == r.agentID
		}); e != nil {
			if err := statusAgentAccess(r, r.derived(e).agentID()); err != nil {
				return resolved{}, err
			}
			key, viaID = e.Key, true
		}
	}
	if key == "" {
		kind := "sessionKey"
		if rules.ShouldResolveAsSessionID(raw) {
			kind = "sessionId"
		}
		return resolved{}, badRequest(fmt.Sprintf("Unknown %s: %s", kind, raw))
	}
	e := d.Index.Get(key)
	if e == nil {
		return resolved{}, badRequest("Unknown sessionKey: " + raw)
	}
	if r.restrictToSpawned && key != r.key && !d.Index.IsChild(r.key, key) {
		return resolved{}, badRequest(errStatusSandboxTree)
	}
	// `current` and a bare key found as typed are the caller's own lookups
	// and are checked as the requester itself, as OpenClaw does
	check := key
	if !explicit && !viaID && (raw == rules.KeyCurrent || key == raw) {
		check = r.key
	}
	if err := d.statusGuard(r, check); err != nil {
		return resolved{}, err
	}
	return resolved{key: key, k: rules.ParseKey(key), displayKey: r.alias.Display(key), viaSessionID: viaID, entry: e}, nil
}

// statusLookup finds raw among the store keys it may stand for: as typed,
// its internal form (current, main), and both scoped to the requester's
// agent; "" when none has an entry.
func (d *Deps) statusLookup(r *requester, raw string) string {
	internal := r.alias.Internal(raw, r.key)
	cands := []string{raw, internal}
	if !strings.HasPrefix(raw, "agent:") {
		cands = append(cands, r.storeKey(internal), "agent:"+r.agentID+":"+raw)
	}
	for _, k := range cands {
		if d.Index.Get(k) != nil {
			return k
		}
	}
	return ""
}

// statusAgentAccess is the agent-to-agent gate session_status applies
// before the visibility guard, with its own wording.
func statusAgentAccess(r *requester, target string) error {
	if target == r.agentID {
		return nil
	}
	if !r.a2a.Enabled {
		return badRequest(errStatusA2ADisabled)
	}
	if !r.a2a.IsAllowed(r.agentID, target) {
		return badRequest(errStatusA2ADenied)
	}
	return nil
}

// statusGuard is the visibility guard; session_status throws its denials.
func (d *Deps) statusGuard(r *requester, key string) error {
	if ok, _, msg := d.guard(r, rules.ActionStatus).Check(key); !ok {
		return badRequest(msg)
	}
	return nil
}

// applyStatusOverrides sets or clears the model override and the thinking
// level. Every argument is checked before anything is written, and the
// entry is written only when something changed.
func (d *Deps) applyStatusOverrides(ctx context.Context, r *requester, target resolved, sp statusParams, out *statusResult) (*sessions.Entry, error) {
	e := target.entry
	agentID := r.derived(e).agentID()
	provider, model := e.Rares().ProviderOverride, e.Rares().ModelOverride
	if sp.hasModel {
		var err error
		if provider, model, err = d.resolveModelParam(agentID, e, sp.model); err != nil {
			return nil, err
		}
	}
	thinking := e.Rares().ThinkingLevel
	if sp.hasThinking {
		var err error
		if thinking, err = d.resolveThinking(e, provider, model, sp.thinking); err != nil {
			return nil, err
		}
	}
	if sp.hasModel {
		out.ModelOverride = json.RawMessage("null")
		if model != "" {
			out.ModelOverride, _ = json.Marshal(provider + "/" + model)
		}
	}
	if provider == e.Rares().ProviderOverride && model == e.Rares().ModelOverride && thinking == e.Rares().ThinkingLevel {
		return e, nil
	}
	changed := false
	ne, rev, err := d.Store.Update(ctx, target.key, func(x *sessions.Entry) error {
		changed = x.Rares().ProviderOverride != provider || x.Rares().ModelOverride != model
		if !changed && x.Rares().ThinkingLevel == thinking {
			return record.ErrUnchanged
		}
		x.SetRare(func(r *sessions.RareFields) {
			r.ProviderOverride, r.ModelOverride, r.ThinkingLevel = provider, model, thinking
		})
		return nil
	})
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, badRequest("Unknown sessionKey: " + target.key)
	}
	if err != nil {
		return nil, err
	}
	// the next call through this worker's index sees the new state
	if err := d.Index.WaitApplied(ctx, rev); err != nil {
		d.Log.Warn("session_status: index catch-up", "err", err)
	}
	out.ChangedModel = changed
	return ne, nil
}

// resolveModelParam maps the model argument to the override to store: ""
// and "default" clear it; an alias or a ref is resolved, the default
// provider being the current override's or the configured default's.
func (d *Deps) resolveModelParam(agentID string, e *sessions.Entry, raw string) (provider, model string, err error) {
	if raw == "" || strings.EqualFold(raw, "default") {
		return "", "", nil
	}
	ref, refusal := d.modelRef(agentID, d.defaultProvider(agentID, e), raw)
	if refusal != "" {
		return "", "", badRequest(refusal)
	}
	return ref.Provider, ref.Model, nil
}

// modelRef resolves a model argument (an alias, or a ref whose provider
// defaults to defProvider) for agentID, or says in OpenClaw's words why
// it cannot: unrecognized, or outside the allowed model set. session_status
// and sessions_spawn both take a model through it.
func (d *Deps) modelRef(agentID, defProvider, raw string) (config.ModelRef, string) {
	ref, problem := d.checkModel(agentID, defProvider, raw)
	switch problem {
	case modelUnrecognized:
		return ref, fmt.Sprintf("Unrecognized model %q.", raw)
	case modelNotAllowed:
		return ref, fmt.Sprintf("Model %q is not allowed.", ref.String())
	}
	return ref, ""
}

// modelProblem is why a model argument cannot be used.
type modelProblem int

const (
	modelOK modelProblem = iota
	modelUnrecognized
	modelNotAllowed
)

// checkModel resolves a model argument and checks it as OpenClaw's
// gateway does before it patches a session's model: a ref must parse, be
// in the allowed set (agents.defaults.models, when set), and, when the
// provider catalog (models.providers) lists any model, be one of them
// (or the agent's configured default): a provider or a model the catalog
// does not know is not allowed, so a typo never reaches a runtime.
func (d *Deps) checkModel(agentID, defProvider, raw string) (config.ModelRef, modelProblem) {
	ref, ok := d.Config.ModelAlias(raw)
	if !ok {
		ref, ok = config.ParseModelRef(raw, defProvider)
	}
	if !ok {
		return ref, modelUnrecognized
	}
	if !d.Config.ModelAllowed(agentID, ref) || !d.Config.ModelCataloged(agentID, ref) {
		return ref, modelNotAllowed
	}
	return ref, modelOK
}

func (d *Deps) defaultProvider(agentID string, e *sessions.Entry) string {
	if e != nil && e.Rares().ProviderOverride != "" { // nil: a session not created yet
		return e.Rares().ProviderOverride
	}
	if ref, ok := config.ParseModelRef(d.Config.AgentModel(agentID), config.DefaultModelProvider); ok {
		return ref.Provider
	}
	return config.DefaultModelProvider
}

// resolveThinking validates a thinking level; "" and "default" reset it.
func (d *Deps) resolveThinking(e *sessions.Entry, provider, model, raw string) (string, error) {
	level := strings.ToLower(raw)
	if level == "" || level == "default" {
		return "", nil
	}
	for _, l := range ThinkingLevels {
		if l == level {
			return level, nil
		}
	}
	probe := &sessions.Entry{Key: e.Key, AgentID: e.AgentID, Model: e.Model, ModelProvider: e.ModelProvider}
	probe.SetRare(func(r *sessions.RareFields) { r.ProviderOverride, r.ModelOverride = provider, model })
	m := d.effectiveModel(probe)
	return "", badRequest(fmt.Sprintf("Thinking level %q is not supported for %s. Use one of: %s.", raw, m.label(), strings.Join(ThinkingLevels, ", ")))
}

// modelInfo is the model a session runs with and where that came from.
type modelInfo struct {
	config.ModelRef
}

func (m modelInfo) label() string {
	if m.Model == "" {
		return "default"
	}
	return m.String()
}

// effectiveModel is the session's override, else its agent's configured
// model, else the model its last turn recorded; zero when none is known
// (the runtime's own model applies).
func (d *Deps) effectiveModel(e *sessions.Entry) modelInfo {
	if e.Rares().ModelOverride != "" {
		return modelInfo{ModelRef: config.ModelRef{Provider: e.Rares().ProviderOverride, Model: e.Rares().ModelOverride}}
	}
	agentID := e.AgentID
	if agentID == "" {
		agentID = rules.AgentIDFromKey(e.Key)
	}
	if ref, ok := config.ParseModelRef(d.Config.AgentModel(agentID), config.DefaultModelProvider); ok {
		return modelInfo{ModelRef: ref}
	}
	if ref, ok := config.ParseModelRef(e.Model, e.ModelProvider); ok {
		return modelInfo{ModelRef: ref}
	}
	return modelInfo{}
}

// statusReads runs the reads the card needs beside the index: the signal
// log's head and changes, and the transcript's latest usage when the
// entry's counters are sparse. They run together: one round trip's wait.
// The last of them runs on the calling goroutine: a goroutine per read
// cost a start and a stack growth (a NATS request's depth) on every call.
// A failed signal-log read is a retryable 503: a card with state version 0
// or an empty delta would tell the caller nothing changed when it may have.
func (d *Deps) statusReads(ctx context.Context, key string, e *sessions.Entry, sp statusParams) (usage, uint64, *StateChanges, error) {
	var (
		wg                    sync.WaitGroup
		version               uint64
		changes               *StateChanges
		versionErr, changeErr error
		reads                 []func()
	)
	if sp.hasChanges {
		changes = &StateChanges{Events: []map[string]any{}}
	}
	if d.Signals != nil && sp.hasChanges {
		reads = append(reads, func() {
			c, err := d.Signals.Since(ctx, key, sp.changesSince, statusChangesLimit)
			if err != nil {
				changeErr = err
				return
			}
			if c.Events == nil {
				c.Events = []map[string]any{}
			}
			changes = &c
		})
	}
	u := entryUsage(e)
	if hw, ok := d.Signals.(headWave); ok && u.sparse() {
		// the version read goes out in the transcript read's wave
		reads = append(reads, func() {
			l, reply, err := d.latestUsage(ctx, key, hw.StateVersionRequest(key))
			u = u.backfill(l)
			if err == nil {
				version, err = hw.StateVersionReply(ctx, key, reply)
			}
			versionErr = err
		})
	} else {
		if d.Signals != nil {
			reads = append(reads, func() { version, versionErr = d.Signals.StateVersion(ctx, key) })
		}
		if u.sparse() {
			reads = append(reads, func() {
				l, _, _ := d.latestUsage(ctx, key, nil)
				u = u.backfill(l)
			})
		}
	}
	if n := len(reads); n > 0 {
		for _, read := range reads[:n-1] {
			wg.Go(read)
		}
		reads[n-1]()
		wg.Wait()
	}
	if err := errors.Join(versionErr, changeErr); err != nil {
		d.Log.Warn("session_status: signal log read failed", "session", key, "err", err)
		return u, 0, nil, bus.Errorf(bus.CodeUnavailable, "session_status: the signal log could not be read (%v); retry", err)
	}
	return u, version, changes, nil
}

// statusRoute is the Route context: where the session began, the route
// of the caller's own live session, and the stored delivery route.
func statusRoute(r *requester, e *sessions.Entry) routeContext {
	var rc routeContext
	if o := e.Origin; o != nil && (o.Provider != "" || o.AccountID != "" || o.ThreadID != "") {
		rc.Origin = &routeOrigin{Provider: o.Provider, AccountID: o.AccountID, ThreadID: o.ThreadID}
	} else if ch := rules.ChannelFromKey(e.Key); ch != "" {
		// older entries lack origin: the key's deliverable prefix says it
		rc.Origin = &routeOrigin{Provider: ch}
	}
	if e.Key == r.key && (e.LastChannel != "" || e.LastTo != "") {
		rc.Active = &routeActive{Channel: e.LastChannel, To: e.LastTo, AccountID: e.LastAccountID, ThreadID: e.LastThreadID()}
	}
	if dc := e.DeliveryContext; dc != nil && *dc != (sessions.DeliveryContext{}) {
		rc.DeliveryContext = dc
	}
	return rc
}

// statusReply is the visible text: the card, the Route context block, and
// the Session state changes block when changesSince was given.
func (d *Deps) statusText(r *requester, e *sessions.Entry, m modelInfo, u usage, out *statusResult) string {
	var b strings.Builder
	b.WriteString(d.statusCard(r, e, m, u))
	if !out.routeContext.empty() {
		b.WriteString("\n\nRoute context:\n")
		writeJSONBlock(&b, out.routeContext)
	}
	if out.StateChanges != nil {
		b.WriteString("\n\nSession state changes:\n")
		writeJSONBlock(&b, struct {
			StateVersion uint64        `json:"stateVersion"`
			StateChanges *StateChanges `json:"stateChanges"`
		}{out.StateVersion, out.StateChanges})
	}
	return b.String()
}

func writeJSONBlock(b *strings.Builder, v any) {
	data, _ := json.MarshalIndent(v, "", "  ")
	b.WriteString("```json\n")
	b.Write(data)
	b.WriteString("\n```")
}

// the version line's product name
const productName = "sessionbus"

func versionLine() string {
	line := "🦞 " + productName + " " + bus.Version
	if c := bus.BuildCommit(); c != "" {
		line += " (" + c + ")"
	}
	return line
}
