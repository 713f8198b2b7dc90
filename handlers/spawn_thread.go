package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/rules/routing"
)

// A spawn with thread=true binds the requester's conversation (the
// thread its last human message came from, else the chat) to the child,
// as OpenClaw's core binds the current conversation: while the binding
// lives, the humans' messages there go to the child (inbound_route.go).
// The binding is written before the spawn's commit point, so a registered
// thread-bound child always has it; a crash in between leaves a binding to
// a child that never existed, which the ingress treats as gone.

// OpenClaw's texts of a thread binding that cannot be made.
const errThreadNoContext = "thread=true requires an active channel conversation context."

func errThreadDisabled(ch string) string {
	return fmt.Sprintf("Thread bindings are disabled for %s (set channels.%s.threadBindings.enabled=true to override for this account, or session.threadBindings.enabled=true globally).", ch, ch)
}

func errThreadSpawnDisabled(ch string) string {
	return fmt.Sprintf("Thread-bound session spawns are disabled for %s (set channels.%s.threadBindings.spawnSessions=true to enable).", ch, ch)
}

func errThreadUnavailable(ch string) string {
	return fmt.Sprintf("Thread bindings are unavailable for %s.", ch)
}

func errThreadNoConversation(ch string) string {
	return fmt.Sprintf("thread=true requires running inside an active %s conversation.", ch)
}

func errThreadBound(ch string) string {
	return fmt.Sprintf("This %s conversation is already bound to another session. Unbind it first before spawning a new thread-bound subagent.", ch)
}

// checkThread decides whether a thread=true spawn may bind the requester's
// conversation, in OpenClaw's order: a channel route, bindings enabled,
// spawns allowed, a channel with threads, a conversation to bind. It
// records the channel's policy in s. Whether another session holds the
// conversation is known only when the binding is written (bind).
func (s *spawn) checkThread() *spawnResult {
	if !s.sp.thread {
		return nil
	}
	o := s.origin
	if o == nil {
		return spawnFail("error", errThreadNoContext)
	}
	ch := strings.ToLower(o.Channel)
	p := s.d.Config.ThreadBindingsFor(ch)
	switch {
	case !p.Enabled:
		return spawnFail("error", errThreadDisabled(ch))
	case !p.SpawnEnabled:
		return spawnFail("error", errThreadSpawnDisabled(ch))
	case routing.Threadless(ch):
		return spawnFail("error", errThreadUnavailable(ch))
	case strings.TrimSpace(o.To) == "" && strings.TrimSpace(o.ThreadID) == "":
		return spawnFail("error", errThreadNoConversation(ch))
	}
	s.threadPolicy = &p
	return nil
}

// threadContext is the context of a thread-bound spawn that names none:
// the channel's threadBindings.defaultSpawnContext.
func (s *spawn) threadContext() string {
	if s.threadPolicy != nil {
		return s.threadPolicy.DefaultSpawnContext
	}
	return config.DefaultSpawnContext
}

// bind writes the child's binding before the spawn's commit point. A
// retry finds its own binding and goes on; a conversation bound to a live
// session refuses the spawn with nothing written; one bound to a session
// that ended (killed, deleted, archived, expired, or never registered) is
// taken over.
func (s *spawn) bind(ctx context.Context) *spawnResult {
	b := spawns.Binding(s.rec)
	if b == nil || s.d.ThreadBindings == nil {
		return nil
	}
	err := s.d.ThreadBindings.Bind(ctx, b, func(old *threadbindings.Binding) bool {
		return !s.d.bindingLive(ctx, old, true)
	})
	switch {
	case errors.Is(err, threadbindings.ErrBound):
		return spawnFail("error", errThreadBound(b.Channel))
	case err != nil:
		return spawnFail("error", "Thread bind failed: "+err.Error())
	}
	return nil
}

// unbind undoes bind for a spawn that did not commit.
func (s *spawn) unbind(ctx context.Context) {
	if err := spawns.UnbindSpawn(ctx, s.d.ThreadBindings, s.rec); err != nil {
		s.d.Log.Warn("sessions_spawn: remove the thread binding of a spawn that did not commit (the ingress ignores it)", "child", s.rec.ChildSessionKey, "err", err)
	}
}

// bindingPendingGrace is how long a binding whose child is not registered
// may belong to a spawn still committing (its steps take milliseconds).
const bindingPendingGrace = time.Minute

// bindingLive reports whether a binding still routes: not expired, and
// its child registered, neither killed nor deleted, its session there, and
// for a run-mode child its run not ended. The worker's indexes answer for
// a child they hold; a child they do not hold yet (spawned a moment ago on
// another worker) is read from the buckets. pending counts a young binding
// whose child is not registered yet as live: a spawn deciding whether it
// may take the conversation over must not take it from one still
// committing.
func (d *Deps) bindingLive(ctx context.Context, b *threadbindings.Binding, pending bool) bool {
	if b.Expired(d.Now().UnixMilli()) {
		return false
	}
	var rec *subagents.Record
	if d.Children != nil {
		rec = d.Children.Get(b.TargetSessionKey)
	}
	if rec == nil {
		r, _, err := d.Subagents.Get(ctx, b.TargetSessionKey)
		switch {
		case errors.Is(err, subagents.ErrNotFound):
			return pending && d.Now().UnixMilli()-b.BoundAt < bindingPendingGrace.Milliseconds()
		case err != nil:
			return true // unknown: keep routing to the child rather than split the thread
		}
		rec = r
	}
	if rec.Deleted || rec.Outcome == subagents.OutcomeKilled || (rec.SpawnMode == spawnModeRun && !rec.Active()) {
		return false
	}
	if pending {
		return true // registered: its entry follows it
	}
	if d.Index != nil && d.Index.Get(b.TargetSessionKey) != nil {
		return true
	}
	_, _, err := d.Store.Get(ctx, b.TargetSessionKey)
	return err == nil
}
