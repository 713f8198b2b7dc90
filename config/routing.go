package config

import (
	"fmt"
	"strings"
)

// validateRouting checks the keys the ingress routes by: session.dmScope,
// session.identityLinks and bindings[]. A bad value is refused at start-up
// (OpenClaw's schema refuses it too): routing a human to the wrong session
// would mix two people's conversations.
func (c *Config) validateRouting() error {
	switch v := strings.ToLower(strings.TrimSpace(c.Session.DMScope)); v {
	case "main", "per-peer", "per-channel-peer", "per-account-channel-peer":
		c.Session.DMScope = v
	default:
		return fmt.Errorf("session.dmScope %q must be main, per-peer, per-channel-peer or per-account-channel-peer", c.Session.DMScope)
	}
	for name, ids := range c.Session.IdentityLinks {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("session.identityLinks has an empty canonical name: name each person (e.g. alice: [telegram:123, discord:456])")
		}
		for _, id := range ids {
			if strings.TrimSpace(id) == "" {
				return fmt.Errorf("session.identityLinks.%s has an empty id: list peer ids such as telegram:123", name)
			}
		}
	}
	agents := map[string]bool{}
	for _, a := range c.Agents.List {
		agents[a.ID] = true
	}
	for i, b := range c.Bindings {
		key := fmt.Sprintf("bindings[%d]", i)
		id := strings.ToLower(strings.TrimSpace(b.AgentID))
		if !agentIDRe.MatchString(id) {
			return fmt.Errorf("%s.agentId %q must match [a-z0-9][a-z0-9_-]{0,63}", key, b.AgentID)
		}
		if len(agents) > 0 && !agents[id] && id != "main" {
			return fmt.Errorf("%s.agentId %q is not in agents.list: bind a configured agent", key, b.AgentID)
		}
		if strings.TrimSpace(b.Match.Channel) == "" {
			return fmt.Errorf("%s.match.channel is required: name the channel the binding is for (e.g. telegram)", key)
		}
		if p := b.Match.Peer; p != nil {
			switch strings.ToLower(strings.TrimSpace(p.Kind)) {
			case "direct", "dm", "group", "channel":
			default:
				return fmt.Errorf("%s.match.peer.kind %q must be direct, group or channel", key, p.Kind)
			}
			if strings.TrimSpace(p.ID) == "" {
				return fmt.Errorf("%s.match.peer.id is required: a peer id, or \"*\" for every peer of the kind", key)
			}
		}
	}
	return nil
}
