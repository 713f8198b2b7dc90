package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
)

// subagents limits and defaults, OpenClaw's (docs/tools.md).
const (
	subagentsDefaultRecentMinutes = 30
	subagentsMaxRecentMinutes     = 24 * 60
	steerMaxChars                 = 4000
	steerRateLimit                = 2000 * time.Millisecond
	steerSettleTimeout            = 5000 * time.Millisecond
	subagentLane                  = "subagent"
	subagentLabelMax              = 48
	subagentTaskMax               = 72
	subagentsToolName             = "subagents"
)

// OpenClaw's exact texts.
const (
	errSubagentUnsupported  = "Unsupported action."
	errSubagentNotOwned     = "Subagents can only control runs spawned from their own session."
	errSubagentLeaf         = "Leaf subagents cannot control other sessions."
	errSubagentSelfSteer    = "Subagents cannot steer themselves."
	errSubagentRateLimited  = "Steer rate limit exceeded. Wait a moment before sending another steer."
	errSubagentMissing      = "Missing subagent target."
	errSubagentUnknown      = "Unknown subagent target."
	subagentsNoneText       = "no running subagents to kill."
	controlScopeChildren    = "children"
	controlScopeNone        = "none"
	subagentKilledRunReason = "killed"
)

// subagentController is who controls what: the caller's own session is the
// controller; a leaf sub-agent (control scope none) may list but not act.
type subagentController struct {
	key              string // controllerSessionKey = the caller's session
	callerKey        string
	callerIsSubagent bool
	controlScope     string
}

// child is a registry record as the tool shows it. A record whose run the
// registry still calls active but whose run record is terminal (killed a
// moment ago, or ended on a gateway that has not finalized the record yet)
// is shown with the run record's outcome, so `list` and `kill` agree with
// what a kill just did instead of waiting for the gateway's bookkeeping.
type child struct {
	rec     *subagents.Record
	endedAt int64
	outcome string
}

func (c *child) ended() bool { return c.endedAt != 0 }

// label is OpenClaw's resolveSubagentLabel: label, else task, else "subagent".
func (c *child) label() string {
	return rules.FirstNonEmpty(strings.TrimSpace(c.rec.Label), strings.TrimSpace(c.rec.Task), "subagent")
}

// subagentsCall is one call's state: the controller, its children in
// OpenClaw's order (newest start first), and the derived facts every
// action shares.
type subagentsCall struct {
	d             *Deps
	ctl           subagentController
	now           int64
	recentMinutes int
	children      []*child
	pending       map[string]int // pending descendants by session key
}

func subagentsTool(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	action, _, err := p.String("action")
	if err != nil {
		return nil, err
	}
	if action == "" {
		action = "list"
	}
	recent, err := readRecentMinutes(p)
	if err != nil {
		return nil, err
	}
	c := &subagentsCall{d: d, ctl: d.subagentController(r), now: d.Now().UnixMilli(), recentMinutes: recent, pending: map[string]int{}}
	switch action {
	case "list":
		if err := c.load(ctx); err != nil {
			return nil, err
		}
		return c.list(), nil
	case "kill":
		target, err := p.RequiredString("target")
		if err != nil {
			return nil, err
		}
		if err := c.load(ctx); err != nil {
			return nil, err
		}
		return c.kill(ctx, target)
	case "steer":
		target, err := p.RequiredString("target")
		if err != nil {
			return nil, err
		}
		message, err := p.RequiredString("message")
		if err != nil {
			return nil, err
		}
		if n := utf8.RuneCountInString(message); n > steerMaxChars {
			return &steerResult{Status: "error", Action: "steer", Target: target,
				Error: fmt.Sprintf("Message too long (%d chars, max %d).", n, steerMaxChars)}, nil
		}
		if err := c.load(ctx); err != nil {
			return nil, err
		}
		return c.steer(ctx, target, message)
	}
	return &failure{Status: "error", Error: errSubagentUnsupported}, nil
}

// readRecentMinutes is OpenClaw's lenient number reader for recentMinutes:
// any finite number (or a string holding one) is floored and clamped to
// 1..1440; absent or 0 means the default 30. Anything else is thrown, as
// an ignored argument would list a window the caller did not ask for.
func readRecentMinutes(p rules.Params) (int, error) {
	f, ok, err := p.Number("recentMinutes")
	if err != nil {
		return 0, badRequest("recentMinutes must be a number of minutes (1 to 1440)")
	}
	if f = math.Floor(f); !ok || f == 0 {
		return subagentsDefaultRecentMinutes, nil
	}
	return int(max(1, min(subagentsMaxRecentMinutes, f))), nil
}

// subagentController resolves the caller's control scope, as OpenClaw
// does: a session that is not a sub-agent controls its children; a
// sub-agent uses its stored subagentControlScope, else its role by depth
// (a depth at or past maxSpawnDepth is a leaf, scope none).
func (d *Deps) subagentController(r *requester) subagentController {
	ctl := subagentController{key: r.key, callerKey: r.key, controlScope: controlScopeChildren}
	if !r.k.IsSubagent() {
		return ctl
	}
	ctl.callerIsSubagent = true
	e := d.Index.Get(r.key)
	if e != nil && e.Rares().SubagentControlScope != "" {
		ctl.controlScope = e.Rares().SubagentControlScope
		return ctl
	}
	if d.subagentDepth(r.key, e) >= maxSpawnDepth(d.Config, r.k.AgentID) {
		ctl.controlScope = controlScopeNone
	}
	return ctl
}

// subagentDepth is the caller's depth: the store's spawnDepth, else its
// registry record's depth, else the ":subagent:" markers in the key.
func (d *Deps) subagentDepth(key string, e *sessions.Entry) int {
	if e != nil && e.SpawnDepth != nil && *e.SpawnDepth >= 0 {
		return *e.SpawnDepth
	}
	if rec := d.Children.Get(key); rec != nil && rec.Depth > 0 {
		return rec.Depth
	}
	return rules.SubagentDepthFromKey(key)
}

// maxSpawnDepth is agents.list[id].subagents.maxSpawnDepth when set, else
// agents.defaults.subagents.maxSpawnDepth.
func maxSpawnDepth(cfg *config.Config, agentID string) int {
	for _, a := range cfg.Agents.List {
		if rules.NormalizeAgentID(a.ID) == agentID && a.Subagents != nil && a.Subagents.MaxSpawnDepth > 0 {
			return a.Subagents.MaxSpawnDepth
		}
	}
	return cfg.Agents.Defaults.Subagents.MaxSpawnDepth
}

// load reads the controller's children from the index (one per child: the
// registry keeps a child's latest run) and, for those the registry calls
// active, their run records, in parallel.
func (c *subagentsCall) load(ctx context.Context) error {
	recs := c.d.Children.Controlled(c.ctl.key)
	c.children = make([]*child, len(recs))
	var wg sync.WaitGroup
	errs := make([]error, len(recs))
	for i, rec := range recs {
		ch := &child{rec: rec, endedAt: rec.EndedAt, outcome: rec.Outcome}
		c.children[i] = ch
		if rec.Active() {
			wg.Go(func() { errs[i] = c.d.mergeRunRecord(ctx, ch) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// OpenClaw's order: newest start (or creation) first.
	sort.SliceStable(c.children, func(i, j int) bool {
		a, b := c.children[i].rec, c.children[j].rec
		ta, tb := firstNonZero(a.StartedAt, a.CreatedAt), firstNonZero(b.StartedAt, b.CreatedAt)
		if ta != tb {
			return ta > tb
		}
		return a.ChildSessionKey < b.ChildSessionKey
	})
	return nil
}

// mergeRunRecord shows an active record's run as ended when its run record
// already is.
func (d *Deps) mergeRunRecord(ctx context.Context, ch *child) error {
	run, _, err := d.Runs.Get(ctx, ch.rec.RunID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil // not queued yet: pending
	}
	if err != nil {
		return fmt.Errorf("read run %s of %s: %w", ch.rec.RunID, ch.rec.ChildSessionKey, err)
	}
	if run.Terminal() {
		ch.endedAt = firstNonZero(run.EndedAt, 1)
		ch.outcome = run.Status
	}
	return nil
}

// pendingDescendants counts the runs below key, recursively over the
// registry, that are not settled: still running, or ended with their
// completion announce not yet delivered, skipped or given up on (OpenClaw
// counts runs "live or ended but not yet cleaned up").
func (c *subagentsCall) pendingDescendants(key string) int {
	if n, ok := c.pending[key]; ok {
		return n
	}
	n := 0
	seen := map[string]bool{key: true}
	queue := []string{key}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, rec := range c.d.Children.Controlled(k) {
			if seen[rec.ChildSessionKey] {
				continue
			}
			seen[rec.ChildSessionKey] = true
			if !settled(rec) {
				n++
			}
			queue = append(queue, rec.ChildSessionKey)
		}
	}
	c.pending[key] = n
	return n
}

// settled reports a child whose run ended and whose announce is done with.
func settled(rec *subagents.Record) bool {
	if rec.Active() {
		return false
	}
	if rec.Deleted {
		return true
	}
	if rec.Announce == nil {
		return false
	}
	switch rec.Announce.State {
	case subagents.AnnounceDelivered, subagents.AnnounceSkipped, subagents.AnnounceFailed:
		return true
	}
	return false
}

// active is OpenClaw's isActiveSubagentRun: not ended, or waiting on
// descendants.
func (c *subagentsCall) active(ch *child) bool {
	return !ch.ended() || c.pendingDescendants(ch.rec.ChildSessionKey) > 0
}

func (c *subagentsCall) recent(ch *child) bool {
	return !c.active(ch) && ch.ended() && ch.endedAt >= c.now-int64(c.recentMinutes)*60_000
}

// ordered is the numbering of list and of index targets: active first,
// then those ended within the recent window.
func (c *subagentsCall) ordered() (active, recent []*child) {
	for _, ch := range c.children {
		if c.active(ch) {
			active = append(active, ch)
		}
	}
	for _, ch := range c.children {
		if c.recent(ch) {
			recent = append(recent, ch)
		}
	}
	return active, recent
}

// firstNonZero is a if set, else b (OpenClaw's `a ?? b` over timestamps).
func firstNonZero(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}
