package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/schema"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/submit"
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
	v, ok := p["recentMinutes"]
	if !ok || v == nil {
		v, ok = p["recent_minutes"]
	}
	if !ok || v == nil {
		return subagentsDefaultRecentMinutes, nil
	}
	var f float64
	var err error
	switch x := v.(type) {
	case json.Number:
		f, err = strconv.ParseFloat(string(x), 64)
	case string:
		if strings.TrimSpace(x) == "" {
			return subagentsDefaultRecentMinutes, nil
		}
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
	case float64:
		f = x
	case int:
		f = float64(x)
	default:
		err = errors.New("not a number")
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badRequest("recentMinutes must be a number of minutes (1 to 1440)")
	}
	f = math.Floor(f)
	if f == 0 {
		return subagentsDefaultRecentMinutes, nil
	}
	return int(max(1, min(subagentsMaxRecentMinutes, f))), nil
}

// subagentController resolves the caller's control scope (reference §5.3):
// a session that is not a sub-agent controls its children; a sub-agent
// uses its stored subagentControlScope, else its role by depth (a depth
// at or past maxSpawnDepth is a leaf, scope none).
func (d *Deps) subagentController(r *requester) subagentController {
	ctl := subagentController{key: r.key, callerKey: r.key, controlScope: controlScopeChildren}
	if !rules.IsSubagentKey(r.key) {
		return ctl
	}
	ctl.callerIsSubagent = true
	e := d.Index.Get(r.key)
	if e != nil && e.Rares().SubagentControlScope != "" {
		ctl.controlScope = e.Rares().SubagentControlScope
		return ctl
	}
	if d.subagentDepth(r.key, e) >= maxSpawnDepth(d.Config, rules.AgentIDFromKey(r.key)) {
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

// ---- list

type subagentAnnounce = schema.SubagentAnnounce

type subagentItem = schema.SubagentItem

type subagentsListResult = schema.SubagentsListResult

func (c *subagentsCall) list() *subagentsListResult {
	active, recent := c.ordered()
	res := &subagentsListResult{
		Status: "ok", Action: "list",
		RequesterSessionKey: c.ctl.key, CallerSessionKey: c.ctl.callerKey, CallerIsSubagent: c.ctl.callerIsSubagent,
		Total: len(c.children), Active: []*subagentItem{}, Recent: []*subagentItem{},
	}
	var text strings.Builder
	text.WriteString("active subagents:\n")
	index := 1
	add := func(chs []*child, to *[]*subagentItem, isActive bool) {
		if len(chs) == 0 {
			text.WriteString("(none)\n")
		}
		for _, ch := range chs {
			start := firstNonZero(ch.rec.StartedAt, ch.rec.CreatedAt)
			end := c.now
			if !isActive {
				end = ch.endedAt
			}
			item, line := c.item(index, ch, end-start)
			*to = append(*to, item)
			text.WriteString(line + "\n")
			index++
		}
	}
	add(active, &res.Active, true)
	fmt.Fprintf(&text, "\nrecent (last %dm):\n", c.recentMinutes)
	add(recent, &res.Recent, false)
	res.Text = strings.TrimSuffix(text.String(), "\n")
	return res
}

// item builds one list row and its text line:
//
//	<index>. <label> (<model>, <runtime>[, <tokens>]) <status>[ - <task>][ · announce <state>[: <error>]]
//
// which is OpenClaw's line plus the announce suffix (sessionbus's own: a
// completion that never reached the requester shows here).
func (c *subagentsCall) item(index int, ch *child, runtimeMs int64) (*subagentItem, string) {
	rec := ch.rec
	e := c.d.Index.Get(rec.ChildSessionKey)
	pending := c.pendingDescendants(rec.ChildSessionKey)
	label := truncateLine(ch.label(), subagentLabelMax)
	task := truncateLine(strings.TrimSpace(rec.Task), subagentTaskMax)
	item := &subagentItem{
		Index: index, RunID: rec.RunID, SessionKey: rec.ChildSessionKey,
		Label: label, Task: task, Status: runStatus(ch, pending), PendingDescendants: pending,
		Runtime: formatDurationCompact(runtimeMs), RuntimeMs: max(runtimeMs, 0),
		Model:     rules.FirstNonEmpty(modelRef(e), rec.Model),
		StartedAt: rec.StartedAt,
	}
	if ch.ended() {
		item.EndedAt = ch.endedAt
	}
	for _, gc := range c.d.Children.Controlled(rec.ChildSessionKey) {
		item.ChildSessions = append(item.ChildSessions, gc.ChildSessionKey)
	}
	sort.Strings(item.ChildSessions)
	in, out, total := rec.InputTokens, rec.OutputTokens, rec.TotalTokens
	if e != nil && (e.InputTokens > 0 || e.OutputTokens > 0 || e.TotalTokens > 0) {
		in, out, total = e.InputTokens, e.OutputTokens, e.TotalTokens
	}
	if total <= 0 {
		total = in + out
	}
	item.TotalTokens = total
	if a := rec.Announce; a != nil {
		item.Announce = &subagentAnnounce{State: a.State, Error: a.Error}
	}

	model := item.Model
	if model == "" {
		model = "model n/a"
	} else if i := strings.LastIndex(model, "/"); i >= 0 && i < len(model)-1 {
		model = model[i+1:]
	}
	var line strings.Builder
	fmt.Fprintf(&line, "%d. %s (%s, %s", index, label, model, item.Runtime)
	if usage := tokenUsage(in, out, total); usage != "" {
		line.WriteString(", " + usage)
	}
	line.WriteString(") " + item.Status)
	if !strings.EqualFold(task, label) {
		line.WriteString(" - " + task)
	}
	if a := item.Announce; a != nil {
		line.WriteString(" · announce " + a.State)
		if a.Error != "" {
			line.WriteString(": " + a.Error)
		}
	}
	return item, line.String()
}

// runStatus is OpenClaw's status string.
func runStatus(ch *child, pending int) string {
	if pending > 0 {
		noun := "children"
		if pending == 1 {
			noun = "child"
		}
		return fmt.Sprintf("active (waiting on %d %s)", pending, noun)
	}
	if !ch.ended() {
		return "running"
	}
	switch ch.outcome {
	case "", subagents.OutcomeOK:
		return "done"
	case subagents.OutcomeError:
		return "failed"
	}
	return ch.outcome
}

// modelRef is OpenClaw's resolveModelRef over a session entry: model (with
// its provider when it has no slash), else the spawn-time overrides.
func modelRef(e *sessions.Entry) string {
	if e == nil {
		return ""
	}
	ref := func(model, provider string) string {
		model, provider = strings.TrimSpace(model), strings.TrimSpace(provider)
		switch {
		case strings.Contains(model, "/"):
			return model
		case model != "" && provider != "":
			return provider + "/" + model
		}
		return rules.FirstNonEmpty(model, provider)
	}
	return rules.FirstNonEmpty(ref(e.Model, e.ModelProvider), ref(e.Rares().ModelOverride, e.Rares().ProviderOverride))
}

// truncateLine cuts at max characters (runes), trims trailing space and
// appends "...", as OpenClaw's truncateLine does (it counts UTF-16 units).
func truncateLine(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:limit]), " \t\r\n") + "..."
}

// formatDurationCompact is OpenClaw's: "n/a" for none, else whole minutes
// (at least 1m), hours and minutes, or days and hours.
func formatDurationCompact(ms int64) string {
	if ms <= 0 {
		return "n/a"
	}
	minutes := max(1, int64(math.Round(float64(ms)/60_000)))
	if minutes < 60 {
		return fmt.Sprintf("%dm", minutes)
	}
	hours, rem := minutes/60, minutes%60
	if hours < 24 {
		if rem > 0 {
			return fmt.Sprintf("%dh%dm", hours, rem)
		}
		return fmt.Sprintf("%dh", hours)
	}
	days, hrem := hours/24, hours%24
	if hrem > 0 {
		return fmt.Sprintf("%dd%dh", days, hrem)
	}
	return fmt.Sprintf("%dd", days)
}

var trailingZero = regexp.MustCompile(`\.0$`)

// formatTokenShort is OpenClaw's compact token count ("" for none).
func formatTokenShort(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n < 1_000:
		return strconv.FormatInt(n, 10)
	case n < 10_000:
		return trailingZero.ReplaceAllString(strconv.FormatFloat(float64(n)/1_000, 'f', 1, 64), "") + "k"
	case n < 1_000_000:
		return strconv.FormatInt(int64(math.Round(float64(n)/1_000)), 10) + "k"
	}
	return trailingZero.ReplaceAllString(strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64), "") + "m"
}

// tokenUsage is OpenClaw's formatTokenUsageDisplay.
func tokenUsage(in, out, total int64) string {
	var parts []string
	io := in + out
	switch {
	case io > 0:
		parts = append(parts, fmt.Sprintf("tokens %s (in %s / out %s)", formatTokenShort(io),
			rules.FirstNonEmpty(formatTokenShort(in), "0"), rules.FirstNonEmpty(formatTokenShort(out), "0")))
	case total > 0:
		parts = append(parts, fmt.Sprintf("tokens %s prompt/cache", formatTokenShort(total)))
	}
	if io > 0 && total > io {
		parts = append(parts, "prompt/cache "+formatTokenShort(total))
	}
	return strings.Join(parts, ", ")
}

// ---- target resolution

// resolveTarget is OpenClaw's resolveSubagentTargetFromRuns: "last" (the
// newest), a 1-based index over [active…, recent…], a child session key
// (contains ':'), an exact label (case-insensitive), a unique label
// prefix, a unique run-id prefix. It returns the child or the error text.
func (c *subagentsCall) resolveTarget(token string) (*child, string) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errSubagentMissing
	}
	if token == "last" {
		if len(c.children) == 0 {
			return nil, errSubagentUnknown
		}
		return c.children[0], ""
	}
	if isDigits(token) {
		active, recent := c.ordered()
		order := append(active, recent...)
		idx, err := strconv.Atoi(token)
		if err != nil || idx <= 0 || idx > len(order) {
			return nil, "Invalid subagent index: " + token
		}
		return order[idx-1], ""
	}
	if strings.Contains(token, ":") {
		for _, ch := range c.children {
			if ch.rec.ChildSessionKey == token {
				return ch, ""
			}
		}
		return nil, "Unknown subagent session: " + token
	}
	lowered := strings.ToLower(token)
	match := func(pred func(*child) bool) []*child {
		var out []*child
		for _, ch := range c.children {
			if pred(ch) {
				out = append(out, ch)
			}
		}
		return out
	}
	switch m := match(func(ch *child) bool { return strings.ToLower(ch.label()) == lowered }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent label: " + token
	}
	switch m := match(func(ch *child) bool { return strings.HasPrefix(strings.ToLower(ch.label()), lowered) }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent label prefix: " + token
	}
	switch m := match(func(ch *child) bool { return strings.HasPrefix(ch.rec.RunID, token) }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent run id prefix: " + token
	}
	return nil, "Unknown subagent target: " + token
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// resolveOrOwnership resolves a kill/steer target. A child session key the
// caller does not control, but that is a registered sub-agent, is refused
// as not owned (forbidden) rather than unknown: the run exists, it is
// just someone else's.
func (c *subagentsCall) resolveOrOwnership(token string) (*child, *failure) {
	ch, msg := c.resolveTarget(token)
	if ch != nil {
		return ch, nil
	}
	if strings.Contains(token, ":") && c.d.Children.Get(strings.TrimSpace(token)) != nil {
		return nil, fail(rules.StatusForbidden, errSubagentNotOwned)
	}
	return nil, fail("error", msg)
}

// ---- kill

type killResult = schema.SubagentsKillResult

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (c *subagentsCall) kill(ctx context.Context, target string) (*killResult, error) {
	if target == "all" || target == "*" {
		if c.ctl.controlScope != controlScopeChildren {
			return &killResult{Status: rules.StatusForbidden, Action: "kill", Target: "all", Error: errSubagentLeaf}, nil
		}
		seen := map[string]bool{}
		labels := []string{}
		killed := 0
		for _, ch := range c.children {
			if seen[ch.rec.ChildSessionKey] {
				continue
			}
			seen[ch.rec.ChildSessionKey] = true
			if !ch.ended() {
				ok, err := c.d.killRun(ctx, ch.rec)
				if err != nil {
					return nil, err
				}
				if ok {
					killed++
					labels = append(labels, ch.label())
				}
			}
			n, ls, err := c.cascade(ctx, ch.rec.ChildSessionKey, seen)
			if err != nil {
				return nil, err
			}
			killed += n
			labels = append(labels, ls...)
		}
		text := subagentsNoneText
		if killed > 0 {
			text = fmt.Sprintf("killed %d %s.", killed, plural(killed, "subagent", "subagents"))
		}
		return &killResult{Status: "ok", Action: "kill", Target: "all", Killed: &killed, Labels: labels, Text: text}, nil
	}
	ch, f := c.resolveOrOwnership(target)
	if f != nil {
		return &killResult{Status: f.Status, Action: "kill", Target: target, Error: f.Error}, nil
	}
	if f := c.checkControl(ch); f != nil {
		return &killResult{Status: f.Status, Action: "kill", Target: target, RunID: ch.rec.RunID, SessionKey: ch.rec.ChildSessionKey, Error: f.Error}, nil
	}
	label := ch.label()
	stopped := false
	if !ch.ended() {
		var err error
		if stopped, err = c.d.killRun(ctx, ch.rec); err != nil {
			return nil, err
		}
	}
	n, labels, err := c.cascade(ctx, ch.rec.ChildSessionKey, map[string]bool{ch.rec.ChildSessionKey: true})
	if err != nil {
		return nil, err
	}
	res := &killResult{Action: "kill", Target: target, RunID: ch.rec.RunID, SessionKey: ch.rec.ChildSessionKey, Label: label}
	if !stopped && n == 0 {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	res.Status, res.CascadeKilled = "ok", &n
	if n > 0 {
		res.CascadeLabels = labels
	}
	switch {
	case stopped && n > 0:
		res.Text = fmt.Sprintf("killed %s (+ %d %s).", label, n, plural(n, "descendant", "descendants"))
	case stopped:
		res.Text = "killed " + label + "."
	default:
		res.Text = fmt.Sprintf("killed %d %s of %s.", n, plural(n, "descendant", "descendants"), label)
	}
	return res, nil
}

// checkControl is OpenClaw's ownership check, then the leaf check.
func (c *subagentsCall) checkControl(ch *child) *failure {
	owner := rules.FirstNonEmpty(strings.TrimSpace(ch.rec.ControllerSessionKey), ch.rec.RequesterSessionKey)
	if owner != c.ctl.key {
		return fail(rules.StatusForbidden, errSubagentNotOwned)
	}
	if c.ctl.controlScope != controlScopeChildren {
		return fail(rules.StatusForbidden, errSubagentLeaf)
	}
	return nil
}

// cascade kills every active run below key, recursively (even below a
// child that already ended), skipping children already seen.
func (c *subagentsCall) cascade(ctx context.Context, key string, seen map[string]bool) (int, []string, error) {
	killed := 0
	var labels []string
	for _, rec := range c.d.Children.Controlled(key) {
		if seen[rec.ChildSessionKey] {
			continue
		}
		seen[rec.ChildSessionKey] = true
		if rec.Active() {
			ok, err := c.d.killRun(ctx, rec)
			if err != nil {
				return 0, nil, err
			}
			if ok {
				killed++
				labels = append(labels, (&child{rec: rec}).label())
			}
		}
		n, ls, err := c.cascade(ctx, rec.ChildSessionKey, seen)
		if err != nil {
			return 0, nil, err
		}
		killed += n
		labels = append(labels, ls...)
	}
	return killed, labels, nil
}

// killRun ends a child's current run as killed (contract step 5): a CAS on
// its run record, which only a run not yet terminal takes. The gateway
// running the turn sees the record turn terminal and stops the turn; the
// registry record is then finalized and the kill announced (step 4). A run
// that was never queued gets a killed record, so it never runs and the
// sweep that would queue it again finds it ended. It reports whether this
// call ended the run.
func (d *Deps) killRun(ctx context.Context, rec *subagents.Record) (bool, error) {
	now := d.Now().UnixMilli()
	killed := false
	_, err := d.Runs.Update(ctx, rec.RunID, func(r *runs.Record) error {
		if r.Terminal() {
			killed = false
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Killed, subagentKilledRunReason, now
		killed = true
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		err = d.Runs.Create(ctx, &runs.Record{
			RunID: rec.RunID, SessionKey: rec.ChildSessionKey, AgentID: rec.ChildAgentID,
			Status: runs.Killed, Error: subagentKilledRunReason, CreatedAt: now, EndedAt: now,
		})
		if errors.Is(err, runs.ErrExists) { // queued meanwhile: kill that record
			return d.killRun(ctx, rec)
		}
		killed = err == nil
	}
	if err != nil {
		return false, fmt.Errorf("kill run %s of %s: %w", rec.RunID, rec.ChildSessionKey, err)
	}
	if killed && d.Revocations != nil {
		// its tokens end now, not when its gateway notices the kill
		if err := d.Revocations.Revoke(ctx, rec.RunID, revocations.ReasonKilled); err != nil {
			d.Log.Warn("killed run's token not revoked: it stays valid until its run stops", "run", rec.RunID, "err", err)
		}
	}
	return killed, nil
}

// ---- steer

type steerResult = schema.SubagentsSteerResult

// steer restarts a child with a new message (contract step 5): the
// registry record takes the new run first, so the interrupted run
// announces nothing; then the old run is killed and given up to 5 s to
// settle; then the new run is queued in the child's session.
func (c *subagentsCall) steer(ctx context.Context, target, message string) (*steerResult, error) {
	ch, f := c.resolveOrOwnership(target)
	if f != nil {
		return &steerResult{Status: f.Status, Action: "steer", Target: target, Error: f.Error}, nil
	}
	rec := ch.rec
	res := &steerResult{Action: "steer", Target: target, RunID: rec.RunID, SessionKey: rec.ChildSessionKey}
	if f := c.checkControl(ch); f != nil {
		res.Status, res.Error = f.Status, f.Error
		return res, nil
	}
	label := ch.label()
	if ch.ended() {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	if c.ctl.callerKey == rec.ChildSessionKey {
		res.Status, res.Error = rules.StatusForbidden, errSubagentSelfSteer
		return res, nil
	}
	// The rate limit holds across stateless workers: a claim that expires
	// by itself (server TTL) after 2 s.
	limitKey := "steer." + bus.EncodeKey(c.ctl.callerKey) + "." + bus.EncodeKey(rec.ChildSessionKey)
	if _, err := c.d.Claims.Take(ctx, limitKey, c.ctl.callerKey, steerRateLimit); err != nil {
		if errors.Is(err, claims.ErrTaken) {
			res.Status, res.Error = "rate_limited", errSubagentRateLimited
			return res, nil
		}
		return nil, err
	}

	sessionID := rec.ChildSessionID
	if e := c.d.Index.Get(rec.ChildSessionKey); e != nil && strings.TrimSpace(e.SessionID) != "" {
		sessionID = strings.TrimSpace(e.SessionID)
	}
	oldRunID, runID := rec.RunID, sessions.NewID()
	now := c.d.Now().UnixMilli()
	req := &runqueue.Request{
		RunID: runID, SessionKey: rec.ChildSessionKey, AgentID: rules.FirstNonEmpty(rec.ChildAgentID, rules.AgentIDFromKey(rec.ChildSessionKey)),
		Message: message, Prompt: message,
		Provenance: &runqueue.Provenance{Kind: provenanceInterSession, SourceSessionKey: c.ctl.callerKey, SourceTool: subagentsToolName},
		Lane:       subagentLane, ChainID: runID, CreatedAt: now,
	}
	finished := false
	_, err := c.d.Subagents.Update(ctx, rec.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != oldRunID || !r.Active() {
			finished = true // ended or steered meanwhile
			return record.ErrUnchanged
		}
		r.RunID, r.Request, r.Queued = runID, req, false
		r.StartedAt, r.DeadlineAt, r.EndedAt = 0, 0, 0
		r.Outcome, r.Error, r.Announce = "", "", nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("steer %s: %w", rec.ChildSessionKey, err)
	}
	if finished {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	if _, err := c.d.killRun(ctx, rec); err != nil {
		c.d.Log.Warn("subagents steer: kill the interrupted run", "run", oldRunID, "err", err)
	}
	wctx, cancel := context.WithTimeout(ctx, steerSettleTimeout)
	_, _ = c.d.Runs.Wait(wctx, oldRunID) // best effort, as in OpenClaw
	cancel()

	runRec := &runs.Record{RunID: runID, SessionKey: req.SessionKey, AgentID: req.AgentID, Status: runs.Pending, CreatedAt: now, ChainID: runID}
	if err := submit.Run(ctx, c.d.Queue, c.d.Runs, req, runRec); err != nil {
		// The registry record keeps the new run, unqueued: any gateway's
		// sweep queues its stored request again (same run id).
		return &steerResult{Status: "error", Action: "steer", Target: target, RunID: runID,
			SessionKey: rec.ChildSessionKey, SessionID: sessionID, Error: err.Error()}, nil
	}
	if _, err := c.d.Subagents.Update(ctx, rec.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != runID || r.Queued {
			return record.ErrUnchanged
		}
		r.Queued = true
		return nil
	}); err != nil {
		c.d.Log.Warn("subagents steer: mark queued", "run", runID, "err", err)
	}
	return &steerResult{Status: "accepted", Action: "steer", Target: target, RunID: runID, SessionKey: rec.ChildSessionKey,
		SessionID: sessionID, Mode: "restart", Label: label, Text: "steered " + label + "."}, nil
}

// firstNonZero is a if set, else b (OpenClaw's `a ?? b` over timestamps).
func firstNonZero(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}
