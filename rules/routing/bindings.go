package routing

import (
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

// binding is one `bindings[]` item, normalized as OpenClaw's
// normalizeBindingMatch does.
type binding struct {
	agentID     string
	channel     string
	account     string // "*": any account; else a normalized account id
	peerKind    string // "" when the binding names no peer
	peerID      string // "*": any peer of peerKind
	scoped      bool   // names a guild, team or roles, which no inbound message carries
	accountTier bool   // no peer: matches on the account (else on the channel)
}

func newBinding(b config.Binding) binding {
	out := binding{
		agentID: rules.NormalizeAgentID(b.AgentID),
		channel: strings.ToLower(strings.TrimSpace(b.Match.Channel)),
		scoped:  strings.TrimSpace(b.Match.GuildID) != "" || strings.TrimSpace(b.Match.TeamID) != "" || len(b.Match.Roles) > 0,
	}
	if a := strings.TrimSpace(b.Match.AccountID); a == "*" {
		out.account = "*"
	} else {
		out.account = NormalizeAccountID(a)
	}
	if p := b.Match.Peer; p != nil {
		out.peerKind, _ = normalizeChatType(p.Kind, "x")
		out.peerID = strings.TrimSpace(p.ID)
	}
	out.accountTier = out.account != "*"
	return out
}

// pickAgent chooses the agent as OpenClaw's resolveAgentRoute does, in its
// order of tiers: an explicit agent; a binding on the exact peer; on any
// peer of the kind ("*"); on the account; on the channel (accountId "*");
// else the default agent. A binding without accountId is for the default
// account only, as in OpenClaw. Within a tier the first binding listed wins.
func (r *Router) pickAgent(m Message, account, chatType, peerID string) (agent, matchedBy string, err error) {
	if a := strings.TrimSpace(m.AgentID); a != "" {
		id, err := rules.ValidateAgentIDInput("agentId", a)
		if err != nil {
			return "", "", err
		}
		if len(r.knownAgents) > 0 && !r.knownAgents[id] {
			return "", "", inputErr(fmt.Sprintf("agentId %q is not in agents.list: name a configured agent, or leave agentId out to route by the bindings", id))
		}
		return id, "explicit", nil
	}
	tiers := []struct {
		name string
		ok   func(b binding) bool
	}{
		{"binding.peer", func(b binding) bool {
			return b.peerID != "" && b.peerID != "*" && kindMatches(b.peerKind, chatType) && b.peerID == peerID
		}},
		{"binding.peer.wildcard", func(b binding) bool { return b.peerID == "*" && kindMatches(b.peerKind, chatType) }},
		{"binding.account", func(b binding) bool { return b.peerKind == "" && b.accountTier }},
		{"binding.channel", func(b binding) bool { return b.peerKind == "" && !b.accountTier }},
	}
	for _, t := range tiers {
		for _, b := range r.bindings {
			if b.channel == m.Channel && !b.scoped && (b.account == "*" || b.account == account) && t.ok(b) {
				return b.agentID, t.name, nil
			}
		}
	}
	return r.defaultAgent, "default", nil
}

// kindMatches is OpenClaw's peerKindMatches: group and channel bindings
// match either kind of chat; direct only direct.
func kindMatches(binding, chat string) bool {
	if binding == chat {
		return true
	}
	return binding != ChatDirect && chat != ChatDirect
}
