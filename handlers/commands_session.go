package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// The session's own commands: /status, /context, /compact, /model and
// /think. Each acts on the message's session and answers one text.

// cmdStatus is /status: the session's status card, as session_status
// draws it.
func cmdStatus(ctx context.Context, d *Deps, ip inboundParams, _ string) (string, error) {
	e, err := d.commandSession(ctx, ip.sessionKey)
	if err != nil {
		return "", err
	}
	r, err := d.commandRequester(ip.sessionKey)
	if err != nil {
		return "", err
	}
	u, _, _, err := d.statusReads(ctx, ip.sessionKey, e, statusParams{})
	if err != nil {
		return "", err
	}
	return d.statusCard(r, e, d.effectiveModel(e), u), nil
}

// contextWindow is the window of the session's model: its entry's when a
// turn recorded one, else the catalog's.
func (d *Deps) contextWindow(e *sessions.Entry) int64 {
	if e.ContextTokens > 0 {
		return e.ContextTokens
	}
	if m := d.effectiveModel(e); m.Model != "" {
		return d.Config.ModelLimits(m.String()).ContextWindow
	}
	return 0
}

// cmdContext is /context: OpenClaw's help, or what sessionbus knows of the
// context (its token counters; it builds no system-prompt report).
func cmdContext(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	sub, _ := firstWord(strings.ToLower(args))
	if sub == "" || sub == "help" {
		return contextHelpText, nil
	}
	e, err := d.commandSession(ctx, ip.sessionKey)
	if err != nil {
		return "", err
	}
	window := d.contextWindow(e)
	if sub == "json" {
		b, _ := json.MarshalIndent(map[string]any{"session": map[string]any{
			"totalTokens": e.TotalTokens, "inputTokens": e.InputTokens,
			"outputTokens": e.OutputTokens, "contextTokens": window,
		}}, "", "  ")
		return string(b), nil
	}
	return contextBreakdownHeader + "\n" +
		fmt.Sprintf("Session tokens (cached): %s total / ctx=%d", formatTokens(e.TotalTokens), window), nil
}

// cmdCompact is /compact [instructions]: the compact op's run, waited for
// as long as the message waits (30 s when it does not), answered with
// OpenClaw's line.
func cmdCompact(ctx context.Context, d *Deps, ip inboundParams, instructions string) (string, error) {
	e, err := d.commandSession(ctx, ip.sessionKey)
	if err != nil {
		return "", err
	}
	if e.SessionID == "" {
		return compactUnavailable, nil
	}
	wait := time.Duration(ip.timeoutSeconds) * time.Second
	if wait <= 0 {
		wait = inboundDefaultTimeoutSeconds * time.Second
	}
	var runID string
	done, err := d.compact(ctx, ip.sessionKey, e, instructions, wait, &runID)
	if err != nil {
		return "", err
	}
	label := "Compacted"
	switch {
	case done == nil:
		label = "Compaction started"
	case done.Status != runs.OK && strings.HasPrefix(done.Error, "nothing to compact"):
		// OpenClaw's run that found nothing to do
		label = "Compaction skipped: " + done.Error
	case done.Status != runs.OK:
		label = "Compaction failed"
		if reason := strings.TrimSpace(done.Error); reason != "" {
			label += ": " + reason
		}
	}
	after := e
	if ne, _, err := d.Store.Get(ctx, ip.sessionKey); err == nil {
		after = ne
	}
	return "⚙️ " + label + " • " + contextUsageShort(after.TotalTokens, d.contextWindow(after)), nil
}

// cmdModel is /model [ref]: the allowed models with the current one, or
// the session's model override set (an alias, a ref, a bare model of the
// current provider) or reset (`default`).
func cmdModel(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	e, err := d.commandSession(ctx, ip.sessionKey)
	if err != nil {
		return "", err
	}
	agentID := rules.FirstNonEmpty(e.AgentID, rules.AgentIDFromKey(ip.sessionKey))
	raw, _ := firstWord(args)
	if raw == "" || strings.EqualFold(raw, "list") {
		return d.modelList(agentID, e), nil
	}
	r, err := d.commandRequester(ip.sessionKey)
	if err != nil {
		return "", err
	}
	target := resolved{key: ip.sessionKey, displayKey: ip.sessionKey, entry: e}
	if strings.EqualFold(raw, "default") {
		if _, err := d.applyStatusOverrides(ctx, r, target, statusParams{hasModel: true}, &statusResult{}); err != nil {
			return "", err
		}
		def, _ := config.ParseModelRef(d.Config.AgentModel(agentID), config.DefaultModelProvider)
		return modelResetText(modelInfo{ModelRef: def}.label()), nil
	}
	ref, problem := d.checkModel(agentID, d.defaultProvider(agentID, e), raw)
	switch problem {
	case modelUnrecognized:
		return modelUnknownText(raw), nil
	case modelNotAllowed:
		return modelNotAllowedText(ref.String()), nil
	}
	if _, err := d.applyStatusOverrides(ctx, r, target, statusParams{hasModel: true, model: ref.String()}, &statusResult{}); err != nil {
		return "", err
	}
	return modelSetText(ref.String()), nil
}

// modelList is OpenClaw's `/model list` text: the current model, then
// every model the session may switch to (the catalog's, or the allowed
// set's when agents.defaults.models is set).
func (d *Deps) modelList(agentID string, e *sessions.Entry) string {
	cur := d.effectiveModel(e).label()
	def, _ := config.ParseModelRef(d.Config.AgentModel(agentID), config.DefaultModelProvider)
	header := fmt.Sprintf("Models (current: %s):", cur)
	if dl := (modelInfo{ModelRef: def}).label(); dl != cur {
		header = fmt.Sprintf("Models (current: %s, default: %s):", cur, dl)
	}
	names := map[string]string{}
	for p, prov := range d.Config.Models.Providers {
		for _, m := range prov.Models {
			ref := config.ModelRef{Provider: strings.ToLower(p), Model: m.ID}
			if d.Config.ModelAllowed(agentID, ref) {
				names[ref.String()] = m.Name
			}
		}
	}
	for k := range d.Config.Agents.Defaults.Models {
		if ref, ok := config.ParseModelRef(k, ""); ok {
			if _, seen := names[ref.String()]; !seen {
				names[ref.String()] = ""
			}
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := []string{header}
	for _, k := range keys {
		l := "- " + k
		if n := names[k]; n != "" && !strings.HasSuffix(k, "/"+n) {
			l += " — " + n
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// cmdThink is /think <level>: the session's thinking level set (`off`
// clears it), or shown.
func cmdThink(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	e, err := d.commandSession(ctx, ip.sessionKey)
	if err != nil {
		return "", err
	}
	raw, _ := firstWord(args)
	if raw == "" {
		return thinkCurrentText(rules.FirstNonEmpty(e.Rares().ThinkingLevel, "off")), nil
	}
	level, ok := normalizeThinking(raw)
	if !ok {
		return thinkUnknownText(raw), nil
	}
	r, err := d.commandRequester(ip.sessionKey)
	if err != nil {
		return "", err
	}
	stored := level
	if level == "off" {
		stored = "" // OpenClaw deletes the session's level for off
	}
	target := resolved{key: ip.sessionKey, displayKey: ip.sessionKey, entry: e}
	if _, err := d.applyStatusOverrides(ctx, r, target, statusParams{hasThinking: true, thinking: stored}, &statusResult{}); err != nil {
		return "", err
	}
	if level == "off" {
		return thinkDisabled, nil
	}
	return thinkSetText(level), nil
}
