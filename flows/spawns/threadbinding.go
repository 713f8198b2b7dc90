package spawns

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/rules/routing"
)

// Conversation is the conversation a thread-bound child's record binds:
// its requester's route when it spawned the child, normalized as the
// ingress normalizes a routed message's, so an inbound message from that
// conversation finds the binding. ok is false for a child not bound.
func Conversation(rec *subagents.Record) (c threadbindings.Conversation, ok bool) {
	if rec == nil || !rec.Thread || rec.RequesterOrigin == nil || rec.RequesterOrigin.Channel == "" {
		return c, false
	}
	o := rec.RequesterOrigin
	return ConversationOf(o.Channel, o.AccountID, o.To, o.ThreadID), true
}

// ConversationOf normalizes a route into the conversation a binding names.
func ConversationOf(channel, accountID, to, threadID string) threadbindings.Conversation {
	return threadbindings.Conversation{
		Channel:   strings.ToLower(strings.TrimSpace(channel)),
		AccountID: routing.NormalizeAccountID(accountID),
		To:        strings.TrimSpace(to),
		ThreadID:  strings.TrimSpace(threadID),
	}
}

// Binding is the binding a thread-bound child's record makes; nil for a
// child not bound.
func Binding(rec *subagents.Record) *threadbindings.Binding {
	c, ok := Conversation(rec)
	if !ok {
		return nil
	}
	return &threadbindings.Binding{
		Conversation: c, TargetSessionKey: rec.ChildSessionKey, TargetKind: "subagent",
		RequesterSessionKey: rec.RequesterSessionKey, RunID: rec.RunID, Mode: rec.SpawnMode,
		AgentID: rec.ChildAgentID, Label: rec.Label, BoundAt: rec.CreatedAt,
		IdleTimeoutMs: rec.ThreadIdleTimeoutMs, MaxAgeMs: rec.ThreadMaxAgeMs,
	}
}

// Unbind ends the binding a child's record made, if it still binds that
// child: the child was killed, deleted or archived.
func Unbind(ctx context.Context, binds *threadbindings.Store, rec *subagents.Record) error {
	c, ok := Conversation(rec)
	if !ok || binds == nil {
		return nil
	}
	return binds.Unbind(ctx, c, rec.ChildSessionKey, "")
}

// UnbindSpawn ends the binding of the spawn rec describes only: a spawn
// that did not commit undoes its own binding, never that of a committed
// spawn of the same child.
func UnbindSpawn(ctx context.Context, binds *threadbindings.Store, rec *subagents.Record) error {
	c, ok := Conversation(rec)
	if !ok || binds == nil {
		return nil
	}
	return binds.Unbind(ctx, c, rec.ChildSessionKey, rec.RunID)
}
