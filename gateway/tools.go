package gateway

import (
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/facts"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// sessionTools is the tool set of a session (rules.ContextTools over the
// runtime's tool table, every stage its entry selects): what a model
// runtime offers its turn. The workers enforce the same set on every call
// (403), so this only keeps a model from being offered tools it would be
// refused.
func sessionTools(cfg *config.Config, key string, sess *sessions.Entry, sender string) []string {
	return rules.ContextTools(cfg, rules.SessionToolContext(cfg, key, facts.Of(sess), false, sender), runtime.ToolNames())
}

// replySender is who sent the human message a run answers ("" for any
// other run): its tools are matched on a group's toolsBySender with it.
func replySender(req *runqueue.Request) string {
	if req.ReplyTo == nil {
		return ""
	}
	return req.ReplyTo.From
}
