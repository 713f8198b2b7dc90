package gateway

import (
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// sessionTools is the tool set of a session (rules.SessionTools over the
// runtime's tool table): what a model runtime offers its turn. The workers
// enforce the same set on every call (403), so this only keeps a model
// from being offered tools it would be refused.
func sessionTools(cfg *config.Config, key string, sess *sessions.Entry) []string {
	var depth *int
	role := ""
	if sess != nil {
		depth, role = sess.SpawnDepth, sess.Rares().SubagentRole
	}
	return rules.SessionTools(cfg, key, depth, role, runtime.ToolNames())
}
