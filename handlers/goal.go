package handlers

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// A session's goal (docs/ops.md, docs/inbound.md): set and cleared by an
// ops request on <prefix>.ops.session.goal or by a human's `/goal`
// message. Each change is one compare-and-set of the session entry, then
// a goal_changed event on the signal log, which notifies the session's
// watchers (its parent first) as a direct human turn does.

// GoalMaxChars is the longest objective, in characters: OpenClaw's own
// limit on a goal's objective, so a goal set here fits there too.
const GoalMaxChars = 16_000

// goalOpsChannel is the channel an ops request's change is recorded as
// coming from.
const goalOpsChannel = "ops"

// Goal change results (goalResult.Status).
const (
	goalSet       = "set"       // a session without a goal now has one
	goalUpdated   = "updated"   // the objective changed
	goalCleared   = "cleared"   // the goal was removed
	goalUnchanged = "unchanged" // the same objective again, or a clear without a goal
)

// goalChange is one request to change a session's goal.
type goalChange struct {
	key       string
	objective string // trimmed; "" with clear
	clear     bool
	actorID   string // who asks: the sender's id on the channel, or the operator
	channel   string // where from: the chat channel, or goalOpsChannel
	opID      string // names the change: the event's dedupe key derives from it
}

// goalResult answers a goal change.
type goalResult struct {
	Status     string         `json:"status"`
	SessionKey string         `json:"sessionKey"`
	Goal       *sessions.Goal `json:"goal,omitempty"`
	// StateVersion is the sequence of the goal_changed event the change
	// appended (absent when nothing changed or the append failed).
	StateVersion uint64 `json:"stateVersion,omitempty"`
}

// checkObjective trims a goal's text and refuses what no goal may be:
// empty, not UTF-8, control characters other than line breaks and tabs
// (kept, as OpenClaw keeps them), or longer than GoalMaxChars.
func checkObjective(text string) (string, error) {
	obj := strings.TrimSpace(text)
	if obj == "" {
		return "", badRequest("the goal text is empty: give the objective (`sessionbus session goal KEY \"text\"`, or `/goal <text>` in a message), or clear the goal with --clear (`/goal clear`)")
	}
	if !utf8.ValidString(obj) {
		return "", badRequest("the goal text must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(obj); n > GoalMaxChars {
		return "", badRequest(fmt.Sprintf("the goal text is %d characters; a goal holds at most %d (OpenClaw's limit): shorten it", n, GoalMaxChars))
	}
	for _, r := range obj {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return "", badRequest(fmt.Sprintf("the goal text contains a control character (%U): remove it", r))
		}
	}
	return obj, nil
}

// nextGoal is the goal after ch, or false when ch changes nothing.
func nextGoal(old *sessions.Goal, ch goalChange, now int64) (*sessions.Goal, string, bool) {
	g := &sessions.Goal{UpdatedAt: now, ActorType: signals.ActorHuman, ActorID: ch.actorID, Channel: ch.channel}
	switch {
	case ch.clear && !old.Active():
		return nil, goalUnchanged, false
	case ch.clear:
		g.Status = sessions.GoalCleared
		return g, goalCleared, true
	case old.Active() && old.Objective == ch.objective:
		return nil, goalUnchanged, false
	case old.Active():
		g.Objective, g.Status, g.CreatedAt = ch.objective, sessions.GoalActive, old.CreatedAt
		return g, goalUpdated, true
	}
	g.Objective, g.Status, g.CreatedAt = ch.objective, sessions.GoalActive, now
	return g, goalSet, true
}

// changeGoal writes ch to the session entry and records goal_changed. An
// unknown session is refused (404) before anything is written; the event
// is best effort, as every signal-log append is: a failed one is logged
// and the change stands.
func (d *Deps) changeGoal(ctx context.Context, ch goalChange) (*goalResult, error) {
	now := d.Now().UnixMilli()
	status := goalUnchanged
	entry, _, err := d.Store.Update(ctx, ch.key, func(e *sessions.Entry) error {
		next, s, changed := nextGoal(e.Rares().Goal, ch, now)
		if status = s; !changed {
			return record.ErrUnchanged
		}
		e.SetRare(func(r *sessions.RareFields) { r.Goal = next })
		return nil
	})
	if err != nil {
		return nil, d.goalSessionErr(ch.key, err)
	}
	out := &goalResult{Status: status, SessionKey: ch.key, Goal: entry.Rares().Goal}
	if status != goalUnchanged {
		out.StateVersion = d.recordGoalChange(ctx, entry, ch, status, now)
	}
	return out, nil
}

// recordGoalChange appends goal_changed and notifies the session's
// watchers; the parent is a producer-supplied watcher, as for a direct
// human turn, so a child spawned before watch cursors existed still tells
// it. It returns the event's sequence (0 when the append failed).
func (d *Deps) recordGoalChange(ctx context.Context, e *sessions.Entry, ch goalChange, status string, now int64) uint64 {
	if d.Notices == nil {
		return 0
	}
	var extra []string
	if p := rules.FirstNonEmpty(e.SpawnedBy, e.ParentSessionKey); p != "" {
		extra = append(extra, p)
	}
	stored, err := d.Notices.Record(ctx, signals.Event{
		DedupeKey: "goal-changed:" + ch.opID, SessionKey: ch.key, SessionID: e.SessionID,
		AgentID: rules.FirstNonEmpty(e.AgentID, rules.AgentIDFromKey(ch.key)),
		Kind:    signals.KindGoalChanged, ActorType: signals.ActorHuman, ActorID: ch.actorID,
		OccurredAt: now, Summary: "goal " + status + " via " + ch.channel,
		Payload: map[string]any{"channel": ch.channel, "action": status},
	}, extra...)
	if err != nil {
		d.Log.Warn("goal: recording goal_changed failed (the change stands)", "session", ch.key, "err", err)
		return 0
	}
	return stored.Sequence
}

// goalOp is <prefix>.ops.session.goal: {"sessionKey", "goal": "text"} sets
// the goal, {"sessionKey", "clear": true} clears it; "actor" names the
// operator (default: "ops", or "adapter:<channel>" for a channel
// adapter's token).
func (d *Deps) goalOp(ctx context.Context, req *bus.Request, key string, p rules.Params) (any, error) {
	ch := goalChange{key: key, channel: goalOpsChannel, opID: sessions.NewID()}
	clear, _, err := p.Bool("clear")
	if err != nil {
		return nil, err
	}
	text, hasText, err := p.String("goal")
	if err != nil {
		return nil, err
	}
	switch {
	case clear && hasText && strings.TrimSpace(text) != "":
		return nil, badRequest("give either the goal text or clear, not both")
	case clear:
		ch.clear = true
	default:
		if ch.objective, err = checkObjective(text); err != nil {
			return nil, err
		}
	}
	if ch.actorID, _, err = p.String("actor"); err != nil {
		return nil, err
	}
	if err := checkInboundID("actor", ch.actorID); err != nil {
		return nil, err
	}
	if ch.actorID == "" {
		ch.actorID = goalOpsChannel
		if req.Caller.Adapter != bus.AnyChannel {
			ch.actorID = "adapter:" + req.Caller.Adapter
		}
	}
	return d.changeGoal(ctx, ch)
}

// goalText is how a goal reads in a confirmation or `/goal`.
func goalText(status string, g *sessions.Goal) string {
	switch status {
	case goalSet:
		return "Goal set: " + g.Objective
	case goalUpdated:
		return "Goal updated: " + g.Objective
	case goalCleared:
		return "Goal cleared."
	}
	switch {
	case g.Active():
		return fmt.Sprintf("Goal: %s\nSet by %s via %s, %s. Change it with /goal <text>, remove it with /goal clear.",
			g.Objective, rules.FirstNonEmpty(g.ActorID, "unknown"), rules.FirstNonEmpty(g.Channel, "unknown"), goalTime(g.UpdatedAt))
	case g != nil && g.Status == sessions.GoalCleared:
		return fmt.Sprintf("No goal (cleared by %s via %s, %s). Set one with /goal <text>.",
			rules.FirstNonEmpty(g.ActorID, "unknown"), rules.FirstNonEmpty(g.Channel, "unknown"), goalTime(g.UpdatedAt))
	}
	return "No goal. Set one with /goal <text>."
}

func goalTime(ms int64) string {
	if ms == 0 {
		return "at an unknown time"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04 UTC")
}
