package handlers

import (
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/kv/sessions"
)

// statusCard is the /status-style card: the lines of OpenClaw's that
// apply to sessionbus, one per fact, lines with nothing to say omitted.
func (d *Deps) statusCard(r *requester, e *sessions.Entry, m modelInfo, u usage) string {
	now := d.Now()
	lines := []string{
		versionLine(),
		"🕒 Time: " + now.Format("2006-01-02 15:04:05") + " (" + zoneName(now) + ")",
		"🧠 Model: " + m.label(),
	}
	if !u.hasCost && m.Model != "" {
		// OpenClaw prices the session's counters with the model's catalog
		// cost when no recorded cost is at hand
		if p := d.Config.ModelLimits(m.String()).Cost; p.Priced() {
			u.cost = (float64(u.input)*p.Input + float64(u.output)*p.Output +
				float64(u.cacheRead)*p.CacheRead + float64(u.cacheWrite)*p.CacheWrite) / 1e6
			u.hasCost = true
		}
	}
	if u.input > 0 || u.output > 0 {
		l := "🧮 Tokens: " + formatTokens(u.input) + " in / " + formatTokens(u.output) + " out"
		if u.hasCost {
			l += " · 💵 Cost: $" + strconv.FormatFloat(u.cost, 'f', 4, 64)
		}
		lines = append(lines, l)
	}
	if u.cacheRead > 0 || u.cacheWrite > 0 {
		hit := u.cacheRead * 100 / (u.cacheRead + u.cacheWrite + u.input)
		lines = append(lines, "🗄️ Cache: "+strconv.FormatInt(hit, 10)+"% hit · "+formatTokens(u.cacheRead)+" cached, "+formatTokens(u.cacheWrite)+" new")
	}
	if u.total > 0 || e.ContextTokens > 0 || e.Rares().CompactionCount > 0 {
		l := "📚 Context: " + formatTokens(u.total)
		if e.ContextTokens > 0 {
			l += "/" + formatTokens(e.ContextTokens) + " (" + strconv.FormatInt(u.total*100/e.ContextTokens, 10) + "%)"
		}
		lines = append(lines, l+" · 🧹 Compactions: "+strconv.FormatInt(e.Rares().CompactionCount, 10))
	}
	session := "🧵 Session: " + e.Key + " • "
	if e.UpdatedAt > 0 {
		session += "updated " + formatAgo(now.Sub(time.UnixMilli(e.UpdatedAt)))
	} else {
		session += "no activity"
	}
	lines = append(lines, session)
	if kids := d.Index.Children(e.Key); len(kids) > 0 {
		running := 0
		for _, k := range kids {
			if k.Status == "running" {
				running++
			}
		}
		l := "🤖 Subagents: " + strconv.Itoa(len(kids))
		if running > 0 {
			l += " (" + strconv.Itoa(running) + " running)"
		}
		lines = append(lines, l)
	}
	if e.Status != "" {
		l := "📌 Tasks: latest " + e.Status
		if e.AbortedLastRun {
			l += " · aborted"
		}
		lines = append(lines, l)
	}
	think := e.Rares().ThinkingLevel
	if think == "" {
		think = "off"
	}
	lines = append(lines,
		"⚙️ Runtime: "+d.runtimeLabel(r.derived(e).agentID())+" · Think: "+think,
		// what a message does while a turn runs (queue.go)
		"🪢 Queue: "+d.queueOf(e, sessionChannel(e)).Mode)
	return strings.Join(lines, "\n")
}

// runtimeLabel is the runtime agents.list[] names for agentID; an agent
// not listed runs the echoing script runtime.
func (d *Deps) runtimeLabel(agentID string) string {
	for _, a := range d.Config.Agents.List {
		if a.ID == agentID && a.Runtime != "" {
			return a.Runtime
		}
	}
	return "script"
}

func zoneName(t time.Time) string {
	if n := t.Location().String(); n != "" && n != "Local" {
		return n
	}
	name, _ := t.Zone()
	return name
}

// formatTokens is OpenClaw's compact count: 950, 1.2k, 3.4m.
func formatTokens(n int64) string {
	trim := func(f float64, unit string) string {
		return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + unit
	}
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return trim(float64(n)/1000, "k")
	}
	return trim(float64(n)/1_000_000, "m")
}

func formatAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m ago"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
}
