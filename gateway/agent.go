package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// model is the model id the turn runs with: the session's override, which
// session_status sets, else the agent's own agents.list[].model; "" leaves
// the runtime's configured model.
func (r *run) model() string {
	if r.sess != nil && r.sess.Rares().ModelOverride != "" {
		return r.sess.Rares().ModelOverride
	}
	for _, a := range r.g.cfg.Agents.List {
		if a.ID == r.req.AgentID {
			if ref, ok := config.ParseModelRef(a.Model, config.DefaultModelProvider); ok {
				return ref.Model
			}
		}
	}
	return ""
}

// thinkingOf is the turn's thinking level: the session's (session_status
// thinkingLevel, or the one its spawn stored), else, for a child whose
// entry this run had to create, the level its spawn recorded.
func thinkingOf(sess *sessions.Entry, child *subagents.Record) string {
	if sess != nil && sess.Rares().ThinkingLevel != "" {
		return sess.Rares().ThinkingLevel
	}
	if child != nil {
		return child.Thinking
	}
	return ""
}

// runAgent runs the turn with its own deadline and identity token. sess
// is the session's entry (nil when it had none): a sub-agent's entry
// decides which tools its turn is offered; model is the one the turn
// uses; child is the sub-agent's registry record (nil for other
// sessions), whose deadline bounds the turn; emit receives the turn's
// live output; steer brings messages steered into it (nil: none).
func (g *Gateway) runAgent(ctx context.Context, req *runqueue.Request, history []json.RawMessage, sess *sessions.Entry, model string, child *subagents.Record, emit func(runtime.Event), steer runtime.Steering) (*runtime.Result, error) {
	timeout := g.turnTimeout(req)
	secs := int(timeout / time.Second)
	if d := deadline(child); !d.IsZero() {
		// a child's run also stops at its deadline, set at its first start
		// and kept across redeliveries: min(its timeout, the time left)
		if left := time.Until(d); left < timeout {
			timeout, secs = max(left, time.Millisecond), child.RunTimeoutSeconds
		}
	}
	// Minting signs a JWT, which costs more than a JetStream round trip, so
	// it happens only for a runtime that hands the token out (exec) or a
	// turn that calls a tool.
	var minted atomic.Bool
	mint := sync.OnceValues(func() (string, error) {
		// the token ends with the run: its timeout plus a margin, and the
		// revocation below when the turn returns
		// a sandboxed session's run calls tools as sandboxed, so the
		// workers apply the sandbox clamp to what its turn may see
		sandboxed := g.cfg.SandboxedSession(req.AgentID, req.SessionKey == g.alias.MainSessionKey(req.AgentID))
		token, err := g.op.Mint(bus.Caller{SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID, Sandboxed: sandboxed, Sender: replySender(req)}, min(timeout+time.Minute, bus.MaxTokenTTL))
		if err != nil {
			return "", &runtime.RunError{Message: "mint run token: " + err.Error()}
		}
		minted.Store(true)
		return token, nil
	})
	defer func() {
		if minted.Load() {
			g.revokeRun(req.RunID)
		}
	}()
	var token string
	if g.needsToken[req.AgentID] {
		var err error
		if token, err = mint(); err != nil {
			return nil, err
		}
	}
	rt := g.runtimes[req.AgentID]
	if rt == nil {
		rt = g.echo
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tools := runtime.ToolsFunc(func(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
		token, err := mint()
		if err != nil {
			return nil, err
		}
		return bus.Call(ctx, g.nc, g.names, token, tool, params)
	})
	turn := runtime.Turn{
		SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID,
		Message: req.Message, Prompt: req.Prompt, ExtraSystemPrompt: req.ExtraSystemPrompt,
		Model: model, Thinking: thinkingOf(sess, child), History: history, NATSURL: g.nc.ConnectedUrl(), Token: token,
		ToolsSubject: g.names.ToolsGroup(),
		AllowedTools: sessionTools(g.cfg, req.SessionKey, sess, replySender(req)),
		Emit:         emit,
		Steering:     steer,
	}
	var endUser func()
	turn.NATSUser, endUser = g.runUserFor(req.AgentID, req.RunID)
	defer endUser()
	res, err := rt.Run(tctx, turn, tools)
	if err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return res, &runtime.RunError{Message: fmt.Sprintf("run timed out after %ds", secs), Timeout: true}
	}
	return res, err
}

// revokeRun ends the validity of the run's tokens once its turn is over, so
// a token copied out of a runtime cannot be replayed. It uses its own
// deadline: the run's context may already be done (a kill, a shutdown).
func (g *Gateway) revokeRun(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if g.revoked == nil {
		return
	}
	if err := g.revoked.Revoke(ctx, runID, revocations.ReasonEnded); err != nil {
		g.log.Warn("run token not revoked: it stays valid until it expires", "run", runID, "err", err)
	}
}
