package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules"
)

// /subagents list|kill|log|info|send|steer|spawn: the subagents tool's
// code run as the message's session, answered in OpenClaw's command words.

// subagentsLogDefault and subagentsLogMax bound /subagents log's limit.
const (
	subagentsLogDefault = 20
	subagentsLogMax     = 200
)

func cmdSubagents(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	action, rest := firstWord(args)
	action = strings.ToLower(action)
	if action == "" {
		action = "list"
	}
	switch action {
	case "list", "kill", "log", "info", "send", "steer", "spawn":
	default:
		return subagentsHelpText, nil
	}
	if _, err := d.commandSession(ctx, ip.sessionKey); err != nil {
		return "", err
	}
	r, err := d.commandRequester(ip.sessionKey)
	if err != nil {
		return "", err
	}
	if action == "spawn" {
		return d.cmdSubagentsSpawn(ctx, r, rest)
	}
	c := &subagentsCall{d: d, ctl: d.subagentController(r), now: d.Now().UnixMilli(),
		recentMinutes: subagentsDefaultRecentMinutes, pending: map[string]int{}}
	if err := c.load(ctx); err != nil {
		return "", err
	}
	target, rest := firstWord(rest)
	switch action {
	case "list":
		return c.commandList(), nil
	case "kill":
		return c.commandKill(ctx, target)
	case "info":
		if target == "" {
			return subagentsInfoUsage, nil
		}
		ch, text := c.commandTarget(target)
		if ch == nil {
			return text, nil
		}
		return c.commandInfo(ctx, ch), nil
	case "log":
		if target == "" {
			return subagentsLogUsage, nil
		}
		ch, text := c.commandTarget(target)
		if ch == nil {
			return text, nil
		}
		return c.commandLog(ctx, r, ch, rest)
	case "steer":
		if target == "" || rest == "" {
			return subagentsSteerUsage, nil
		}
		return c.commandSteer(ctx, target, rest)
	}
	// send
	if target == "" || rest == "" {
		return subagentsSendUsage, nil
	}
	return c.commandSend(ctx, r, target, rest)
}

// commandTarget resolves a target token as the tool does, in the
// command's words: the child, or the text to answer.
func (c *subagentsCall) commandTarget(token string) (*child, string) {
	ch, f := c.resolveOrOwnership(token)
	if f == nil {
		return ch, ""
	}
	if f.Status == rules.StatusForbidden {
		return nil, "⚠️ " + f.Error
	}
	return nil, subagentTargetText(f.Error)
}

func (c *subagentsCall) commandList() string {
	_, active, recent := c.rows()
	lines := []string{subagentsListActive, subagentsListRule}
	section := func(ls []string) {
		if len(ls) == 0 {
			lines = append(lines, subagentsListNone)
		}
		lines = append(lines, ls...)
	}
	section(active)
	lines = append(lines, "", subagentsListRecent(c.recentMinutes), subagentsListRule)
	section(recent)
	return strings.Join(lines, "\n")
}

// commandKill is /subagents kill: OpenClaw confirms a kill with no
// message; a finished run and a refusal are answered.
func (c *subagentsCall) commandKill(ctx context.Context, target string) (string, error) {
	if target == "" {
		return subagentsKillUsage, nil
	}
	if target != "all" && target != "*" {
		ch, text := c.commandTarget(target)
		if ch == nil {
			return text, nil
		}
		target = ch.rec.ChildSessionKey
	}
	res, err := c.kill(ctx, target)
	if err != nil {
		return "", err
	}
	switch res.Status {
	case rules.StatusForbidden, "error":
		return "⚠️ " + res.Error, nil
	case "done":
		return res.Text, nil
	}
	return "", nil
}

func (c *subagentsCall) commandInfo(ctx context.Context, ch *child) string {
	rec := ch.rec
	sessionID := rec.ChildSessionID
	if e, _, err := c.d.Store.Get(ctx, rec.ChildSessionKey); err == nil && e.SessionID != "" {
		sessionID = e.SessionID
	}
	runtime := "n/a"
	if start := firstNonZero(rec.StartedAt, 0); start > 0 {
		end := ch.endedAt
		if end == 0 {
			end = c.now
		}
		runtime = formatDurationCompact(end - start)
	}
	outcome := "n/a"
	if ch.ended() {
		outcome = rules.FirstNonEmpty(ch.outcome, "ok")
		if rec.Error != "" {
			outcome += " (" + rec.Error + ")"
		}
	}
	lines := []string{
		subagentInfoHeader,
		"Status: " + runStatus(ch, c.pendingDescendants(rec.ChildSessionKey)),
		"Label: " + ch.label(),
		"Task: " + rules.FirstNonEmpty(strings.TrimSpace(rec.Task), "n/a"),
		"Run: " + rec.RunID,
		"Session: " + rec.ChildSessionKey,
		"SessionId: " + rules.FirstNonEmpty(sessionID, "n/a"),
		"Transcript: " + c.d.transcriptPath(rec.ChildSessionKey),
		"Runtime: " + runtime,
		"Created: " + c.withAge(rec.CreatedAt),
		"Started: " + c.withAge(rec.StartedAt),
		"Ended: " + c.withAge(ch.endedAt),
		"Cleanup: " + rec.Cleanup,
		"Outcome: " + outcome,
	}
	return strings.Join(lines, "\n")
}

// withAge is OpenClaw's formatTimestampWithAge: ISO time and how long ago.
func (c *subagentsCall) withAge(ms int64) string {
	if ms <= 0 {
		return "n/a"
	}
	return formatExpiry(ms) + " (" + formatAgo(time.Duration(c.now-ms)*time.Millisecond) + ")"
}

// transcriptPath is where a session's transcript is: its subject in the
// transcripts stream (sessionbus keeps no transcript files).
func (d *Deps) transcriptPath(key string) string {
	return d.Names.TranscriptsStream() + "/" + d.Names.Transcript(bus.EncodeKey(key))
}

// commandLog is /subagents log <id> [limit] [tools]: the child's newest
// messages (sanitized as sessions_history shows them), one line each.
func (c *subagentsCall) commandLog(ctx context.Context, r *requester, ch *child, rest string) (string, error) {
	limit, includeTools := subagentsLogDefault, false
	for _, tok := range strings.Fields(rest) {
		if strings.EqualFold(tok, "tools") {
			includeTools = true
		} else if n, err := strconv.Atoi(tok); err == nil && isDigits(tok) {
			limit = min(subagentsLogMax, max(1, n))
		}
	}
	params, err := toolParams(map[string]any{"sessionKey": ch.rec.ChildSessionKey, "limit": limit, "includeTools": includeTools})
	if err != nil {
		return "", err
	}
	raw, err := sessionsHistory(ctx, c.d, r, params)
	if err != nil {
		return "", err
	}
	var page struct {
		Messages []map[string]any `json:"messages"`
		Error    string           `json:"error"`
	}
	if err := decodeResult(raw, &page); err != nil {
		return "", err
	}
	if page.Error != "" {
		return "⚠️ " + page.Error, nil
	}
	lines := []string{subagentLogHeader(ch.label())}
	for _, m := range page.Messages {
		text := strings.TrimSpace(plainText(m))
		if text == "" {
			continue
		}
		who := "User"
		if role(m) == "assistant" {
			who = "Assistant"
		}
		lines = append(lines, who+": "+text)
	}
	if len(lines) == 1 {
		lines = append(lines, subagentLogNone)
	}
	return strings.Join(lines, "\n"), nil
}

// commandSteer is /subagents steer: the tool's steer, OpenClaw's answers.
func (c *subagentsCall) commandSteer(ctx context.Context, target, message string) (string, error) {
	ch, text := c.commandTarget(target)
	if ch == nil {
		return text, nil
	}
	if n := utf8.RuneCountInString(message); n > steerMaxChars {
		return fmt.Sprintf("⚠️ Message too long (%d chars, max %d).", n, steerMaxChars), nil
	}
	res, err := c.steer(ctx, ch.rec.ChildSessionKey, message)
	if err != nil {
		return "", err
	}
	switch {
	case res.Status == "accepted":
		return subagentSteeredText(ch.label(), res.RunID), nil
	case res.Status == "done" && res.Text != "":
		return res.Text, nil
	case res.Status == "error":
		return "send failed: " + rules.FirstNonEmpty(res.Error, "error"), nil
	}
	return "⚠️ " + rules.FirstNonEmpty(res.Error, "send failed"), nil
}

// commandSend is /subagents send: a message into the child's session, as
// sessions_send sends it, waited for 30 s.
func (c *subagentsCall) commandSend(ctx context.Context, r *requester, target, message string) (string, error) {
	ch, text := c.commandTarget(target)
	if ch == nil {
		return text, nil
	}
	if f := c.checkControl(ch); f != nil {
		return "⚠️ " + f.Error, nil
	}
	params, err := toolParams(map[string]any{"sessionKey": ch.rec.ChildSessionKey, "message": message, "timeoutSeconds": inboundDefaultTimeoutSeconds})
	if err != nil {
		return "", err
	}
	raw, err := sessionsSend(ctx, c.d, r, params)
	if err != nil {
		return "", err
	}
	var res struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
		Reply  string `json:"reply"`
		Error  string `json:"error"`
	}
	if err := decodeResult(raw, &res); err != nil {
		return "", err
	}
	switch res.Status {
	case "timeout", "accepted":
		return subagentStillRunningText(res.RunID), nil
	case "error":
		return subagentErrorText(res.Error, res.RunID), nil
	case rules.StatusForbidden:
		return "⚠️ " + rules.FirstNonEmpty(res.Error, "send failed"), nil
	}
	if res.Reply != "" {
		return res.Reply, nil
	}
	return subagentSentText(ch.label(), res.RunID), nil
}

// cmdSubagentsSpawn is /subagents spawn <agentId> <task> [--model m]
// [--thinking l]: a run-mode sessions_spawn by the message's session.
func (d *Deps) cmdSubagentsSpawn(ctx context.Context, r *requester, rest string) (string, error) {
	toks := strings.Fields(rest)
	var agentID, model, thinking string
	var task []string
	if len(toks) > 0 {
		agentID = toks[0]
	}
	for i := 1; i < len(toks); i++ {
		switch {
		case toks[i] == "--model" && i+1 < len(toks):
			i++
			model = toks[i]
		case toks[i] == "--thinking" && i+1 < len(toks):
			i++
			thinking = toks[i]
		default:
			task = append(task, toks[i])
		}
	}
	if agentID == "" || len(task) == 0 {
		return subagentsSpawnUsage, nil
	}
	p := map[string]any{"task": strings.Join(task, " "), "agentId": agentID, "mode": "run", "cleanup": "keep"}
	if model != "" {
		p["model"] = model
	}
	if thinking != "" {
		p["thinking"] = thinking
	}
	params, err := toolParams(p)
	if err != nil {
		return "", err
	}
	raw, err := sessionsSpawn(ctx, d, r, params)
	if err != nil {
		var be *bus.Error
		if errors.As(err, &be) && be.Code == bus.CodeBadRequest {
			return "Spawn failed: " + be.Message, nil
		}
		return "", err
	}
	var res spawnResult
	if err := decodeResult(raw, &res); err != nil {
		return "", err
	}
	if res.Status == "accepted" {
		return subagentSpawnedText(agentID, res.ChildSessionKey, res.RunID), nil
	}
	return "Spawn failed: " + rules.FirstNonEmpty(res.Error, res.Status), nil
}

// toolParams is a tool's parameters as a caller would send them.
func toolParams(m map[string]any) (rules.Params, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return rules.ParseParams(b)
}

// decodeResult reads a tool's result (a value, or already encoded) into v.
func decodeResult(res any, v any) error {
	b, ok := res.(json.RawMessage)
	if !ok {
		if c, isChecked := res.(checkedResult); isChecked {
			b = json.RawMessage(c)
		} else {
			var err error
			if b, err = json.Marshal(res); err != nil {
				return err
			}
		}
	}
	return json.Unmarshal(b, v)
}
