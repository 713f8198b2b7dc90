package handlers

import (
	"context"
	"slices"
	"strings"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/rules"
)

// agentsListEntry is one row of agents_list.
type agentsListEntry = schema.AgentsListEntry

type agentsListResult = schema.AgentsListResult

// agentsList is agents_list: the agent ids the caller may name in
// sessions_spawn. The requester comes first, the rest sorted as
// JavaScript's localeCompare sorts them (ICU root collation, reproduced
// with golang.org/x/text/collate's root locale). It takes no parameters.
func agentsList(_ context.Context, d *Deps, r *requester, _ rules.Params) (any, error) {
	requester := r.k.AgentID // the agent segment of its key, not the token's
	allow := d.Config.SubagentsFor(requester).AllowAgents
	allowAny := false
	allowed := []string{requester}
	add := func(id string) {
		if !slices.Contains(allowed, id) {
			allowed = append(allowed, id)
		}
	}
	for _, a := range allow {
		if strings.TrimSpace(a) == "*" {
			allowAny = true
		}
	}
	configured := map[string]string{} // id → name
	for _, a := range d.Config.Agents.List {
		configured[rules.NormalizeAgentID(a.ID)] = strings.TrimSpace(a.Name)
	}
	if allowAny {
		for _, a := range d.Config.Agents.List {
			add(rules.NormalizeAgentID(a.ID))
		}
	} else {
		for _, a := range allow {
			if t := strings.TrimSpace(a); t != "" && t != "*" {
				add(rules.NormalizeAgentID(t))
			}
		}
	}
	rest := allowed[1:]
	collate.New(language.Und).SortStrings(rest)
	out := &agentsListResult{Requester: requester, AllowAny: allowAny, Agents: make([]agentsListEntry, 0, len(allowed))}
	for _, id := range allowed {
		name, ok := configured[id]
		out.Agents = append(out.Agents, agentsListEntry{ID: id, Name: name, Configured: ok})
	}
	return out, nil
}
