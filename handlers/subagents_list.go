package handlers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/rules"
)

// The list action: the controller's children, active first, then those
// ended within the recent window, as rows and as OpenClaw's text.

type subagentAnnounce = schema.SubagentAnnounce

type subagentItem = schema.SubagentItem

type subagentsListResult = schema.SubagentsListResult

func (c *subagentsCall) list() *subagentsListResult {
	res, activeLines, recentLines := c.rows()
	var text strings.Builder
	section := func(lines []string) {
		if len(lines) == 0 {
			text.WriteString("(none)\n")
		}
		for _, l := range lines {
			text.WriteString(l + "\n")
		}
	}
	text.WriteString("active subagents:\n")
	section(activeLines)
	fmt.Fprintf(&text, "\nrecent (last %dm):\n", c.recentMinutes)
	section(recentLines)
	res.Text = strings.TrimSuffix(text.String(), "\n")
	return res
}

// rows is the list's items, active first then recent, numbered on across
// both, with each one's text line; the tool and /subagents list frame the
// lines each in its own words.
func (c *subagentsCall) rows() (res *subagentsListResult, activeLines, recentLines []string) {
	active, recent := c.ordered()
	res = &subagentsListResult{
		Status: "ok", Action: "list",
		RequesterSessionKey: c.ctl.key, CallerSessionKey: c.ctl.callerKey, CallerIsSubagent: c.ctl.callerIsSubagent,
		Total: len(c.children), Active: []*subagentItem{}, Recent: []*subagentItem{},
	}
	index := 1
	add := func(chs []*child, to *[]*subagentItem, isActive bool) []string {
		var lines []string
		for _, ch := range chs {
			start := firstNonZero(ch.rec.StartedAt, ch.rec.CreatedAt)
			end := c.now
			if !isActive {
				end = ch.endedAt
			}
			item, line := c.item(index, ch, end-start)
			*to = append(*to, item)
			lines = append(lines, line)
			index++
		}
		return lines
	}
	activeLines = add(active, &res.Active, true)
	recentLines = add(recent, &res.Recent, false)
	return res, activeLines, recentLines
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
