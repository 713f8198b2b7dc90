package handlers

import (
	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules"
)

// requester is the calling session as the tools see it:
// identity from the verified token, everything else from config and store.
type requester struct {
	key               string    // effective requester key (internal form)
	k                 rules.Key // key, parsed once
	agentID           string
	sandboxed         bool
	sender            string // who sent the human message the caller's run answers, if any
	alias             rules.Alias
	visibility        rules.Visibility
	restrictToSpawned bool
	a2a               rules.A2APolicy
	runID             string // the run the caller's token was minted for, if any
	callerKey         string // the session key in the token, as minted (blank: no session context)
}

func (d *Deps) newRequester(c bus.Caller) (*requester, error) {
	cfg := d.Config
	alias := rules.ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope)
	key := alias.Internal(c.SessionKey, c.SessionKey)
	if key == "" {
		key = alias.Alias
	}
	configured, _ := rules.ParseVisibility(cfg.Tools.Sessions.Visibility)
	clamp := cfg.Agents.Defaults.Sandbox.SessionToolsVisibility
	k := rules.ParseKey(key)
	agentID := c.AgentID
	if agentID == "" {
		agentID = k.AgentID
	}
	return &requester{
		key:               key,
		k:                 k,
		agentID:           agentID,
		sandboxed:         c.Sandboxed,
		sender:            c.Sender,
		alias:             alias,
		visibility:        rules.EffectiveVisibility(configured, c.Sandboxed, clamp),
		restrictToSpawned: rules.RestrictToSpawned(c.Sandboxed, clamp, key),
		a2a:               rules.A2APolicy{Enabled: cfg.Tools.AgentToAgent.Enabled, Allow: cfg.Tools.AgentToAgent.Allow},
		runID:             c.RunID,
		callerKey:         c.SessionKey,
	}, nil
}

// guard builds the visibility guard (tools.sessions.visibility,
// agent-to-agent policy, sandbox clamp) for one action.
func (d *Deps) guard(r *requester, a rules.Action) rules.Guard {
	return rules.Guard{
		Action:         a,
		RequesterKey:   r.key,
		RequesterAgent: r.k.AgentID,
		Visibility:     r.visibility,
		A2A:            r.a2a,
		IsSpawned:      func(target string) bool { return d.Index.IsChild(r.key, target) },
	}
}
