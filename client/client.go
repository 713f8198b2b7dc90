// Package client is the Go client of the session tools: one typed method
// per tool (parameters and results are the schema package's types, the
// same the published JSON Schemas are derived from), context deadlines,
// idempotency keys and caller tokens, static or minted from the operator
// credentials.
//
// A tool's thrown error (bad arguments, a refused token, a tool outside
// the caller's tool set...) comes back as *bus.Error with its code
// (docs/tools.md). An ordinary failure reply ({status: "error" |
// "forbidden", error}) of a tool whose result has no status field
// (sessions_list, sessions_history, session_status, agents_list) comes back
// as *Refusal; the tools whose results carry a status (sessions_send,
// sessions_spawn, sessions_yield, subagents) return it in the result.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 60 * time.Second

// sendSlack is how much longer than a sessions_send's own wait
// (timeoutSeconds) the request may take: the worker answers when the wait
// ends, and the reply still has to arrive.
const sendSlack = 10 * time.Second

// Client calls the session tools over one NATS connection as one caller.
// It is safe for concurrent use.
type Client struct {
	nc      *nats.Conn
	names   bus.Names
	tokens  TokenSource
	timeout time.Duration
	retries int
	newKey  func() string
}

// Option configures a Client.
type Option func(*Client)

// WithPrefix sets the deployment's subject prefix (bus.prefix; default sb).
func WithPrefix(prefix string) Option { return func(c *Client) { c.names = bus.NewNames(prefix) } }

// WithTimeout sets how long a call whose context has no deadline may take
// (default DefaultTimeout). A sessions_send that waits longer for its
// reply (timeoutSeconds) is given that wait plus a margin.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries retries a call up to n times when no worker answered (none
// running yet, or the one asked stopped: code 503). A sessions_send or
// sessions_spawn is retried only with an idempotency key, so a retry never
// starts a second run or child; with n > 0 the client gives each one
// without a key a fresh key (a UUID) first.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// New returns a client calling on nc with the caller tokens from tokens.
func New(nc *nats.Conn, tokens TokenSource, opts ...Option) *Client {
	c := &Client{nc: nc, names: bus.NewNames(""), tokens: tokens, timeout: DefaultTimeout, newKey: uuid.NewString}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Refusal is an ordinary failure reply of a tool whose result has no
// status field: a policy or lookup failure, as OpenClaw returns it.
type Refusal struct {
	Status string // "error" or "forbidden"
	Msg    string
}

func (r *Refusal) Error() string { return r.Status + ": " + r.Msg }

// Call calls tool with params (any JSON-encodable value; a
// json.RawMessage or []byte is sent as it is, nil as {}) and returns the
// reply body. It is what the typed methods use; a thrown error is a
// *bus.Error.
func (c *Client) Call(ctx context.Context, tool string, params any) (json.RawMessage, error) {
	body, err := encode(params)
	if err != nil {
		return nil, err
	}
	timeout := c.timeout
	if tool == "sessions_send" {
		var p struct {
			TimeoutSeconds json.Number `json:"timeoutSeconds"`
		}
		if json.Unmarshal(body, &p) == nil {
			if n, err := p.TimeoutSeconds.Int64(); err == nil && n >= 0 {
				timeout = max(timeout, time.Duration(n)*time.Second+sendSlack)
			}
		}
	}
	return c.call(ctx, tool, body, timeout, retrySafe(tool, body))
}

// retrySafe says whether a raw call may be sent again when no worker took
// it: reads may, sends and spawns only with an idempotency key, the rest
// (kill, steer, yield, setting a model) not.
func retrySafe(tool string, body []byte) bool {
	switch tool {
	case "sessions_list", "sessions_history", "agents_list":
		return true
	case "sessions_send", "sessions_spawn":
		var p struct {
			IdempotencyKey any `json:"idempotencyKey"`
		}
		return json.Unmarshal(body, &p) == nil && p.IdempotencyKey != nil && p.IdempotencyKey != ""
	}
	return false
}

// Tools returns the tools the caller may call, with their parameter
// schemas, as the workers' schema subject answers: the caller's tool
// policy applied (a sub-agent is offered only its own tool set).
func (c *Client) Tools(ctx context.Context) ([]schema.Function, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	tok, err := c.tokens.Token(ctx)
	if err != nil {
		return nil, &bus.Error{Code: bus.CodeUnauthorized, Message: "caller token: " + err.Error()}
	}
	data, err := bus.Schema(ctx, c.nc, c.names, tok)
	if err != nil {
		return nil, err
	}
	var fns []schema.Function
	if err := json.Unmarshal(data, &fns); err != nil {
		return nil, fmt.Errorf("decode the tool schemas: %w", err)
	}
	return fns, nil
}

func encode(params any) ([]byte, error) {
	switch p := params.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return p, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode parameters: %w", err)
	}
	return b, nil
}

// call sends one request, with the default deadline when ctx has none,
// retrying when no worker answered and retry allows it.
func (c *Client) call(ctx context.Context, tool string, body []byte, timeout time.Duration, retry bool) (json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		tok, err := c.tokens.Token(ctx)
		if err != nil {
			return nil, &bus.Error{Code: bus.CodeUnauthorized, Message: "caller token: " + err.Error()}
		}
		reply, err := bus.Call(ctx, c.nc, c.names, tok, tool, body)
		if err == nil || !retry || attempt >= c.retries || !retryable(err) || ctx.Err() != nil {
			return reply, err
		}
		// a worker may be starting or another one taking over: back off a
		// little, within the caller's deadline
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
}

// retryable: no worker took the request, or the one that did was stopping.
func retryable(err error) bool {
	e, ok := bus.AsError(err)
	return ok && e.Code == bus.CodeUnavailable || errors.Is(err, nats.ErrNoResponders)
}

// typed calls tool and decodes its reply into a new R. With refusals set,
// an ordinary failure reply is returned as *Refusal.
func typed[R any](ctx context.Context, c *Client, tool string, params any, timeout time.Duration, retry, refusals bool) (*R, error) {
	body, err := encode(params)
	if err != nil {
		return nil, err
	}
	data, err := c.call(ctx, tool, body, timeout, retry)
	if err != nil {
		return nil, err
	}
	if refusals {
		var f schema.Failure
		if json.Unmarshal(data, &f) == nil && (f.Status == "error" || f.Status == "forbidden") && f.Error != "" {
			return nil, &Refusal{Status: f.Status, Msg: f.Error}
		}
	}
	out := new(R)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decode %s reply: %w", tool, err)
	}
	return out, nil
}

// SessionsList lists the sessions visible to the caller.
func (c *Client) SessionsList(ctx context.Context, p schema.SessionsListParams) (*schema.SessionsListResult, error) {
	return typed[schema.SessionsListResult](ctx, c, "sessions_list", p, c.timeout, true, true)
}

// SessionsHistory reads a session's sanitized transcript.
func (c *Client) SessionsHistory(ctx context.Context, p schema.SessionsHistoryParams) (*schema.SessionsHistoryResult, error) {
	return typed[schema.SessionsHistoryResult](ctx, c, "sessions_history", p, c.timeout, true, true)
}

// SessionsSend sends a message into a session and, unless
// p.TimeoutSeconds is 0, waits up to that long (default 30 s) for the
// reply. Without a context deadline the call may take that wait plus a
// margin. The result's Status says what happened (ok, accepted, timeout,
// error, forbidden).
func (c *Client) SessionsSend(ctx context.Context, p schema.SessionsSendParams) (*schema.SessionsSendResult, error) {
	wait := 30 * time.Second
	if p.TimeoutSeconds != nil {
		wait = time.Duration(*p.TimeoutSeconds) * time.Second
	}
	if c.retries > 0 && p.IdempotencyKey == "" {
		p.IdempotencyKey = c.newKey()
	}
	return typed[schema.SessionsSendResult](ctx, c, "sessions_send", p, max(c.timeout, wait+sendSlack), p.IdempotencyKey != "", false)
}

// SessionsSpawn spawns a sub-agent; it returns at once.
func (c *Client) SessionsSpawn(ctx context.Context, p schema.SessionsSpawnParams) (*schema.SessionsSpawnResult, error) {
	if c.retries > 0 && p.IdempotencyKey == "" {
		p.IdempotencyKey = c.newKey()
	}
	return typed[schema.SessionsSpawnResult](ctx, c, "sessions_spawn", p, c.timeout, p.IdempotencyKey != "", false)
}

// SessionStatus returns a session's status card (and sets its model or
// thinking level when asked).
func (c *Client) SessionStatus(ctx context.Context, p schema.SessionStatusParams) (*schema.SessionStatusResult, error) {
	// setting a model is not idempotent in its result (changedModel)
	retry := p.Model == nil && p.ThinkingLevel == nil
	return typed[schema.SessionStatusResult](ctx, c, "session_status", p, c.timeout, retry, true)
}

// SessionsYield ends the caller's turn (a token with a runId only).
func (c *Client) SessionsYield(ctx context.Context, p schema.SessionsYieldParams) (*schema.SessionsYieldResult, error) {
	return typed[schema.SessionsYieldResult](ctx, c, "sessions_yield", p, c.timeout, false, false)
}

// SubagentsList lists the caller's sub-agents; recentMinutes 0 is the
// default window (30).
func (c *Client) SubagentsList(ctx context.Context, recentMinutes int) (*schema.SubagentsListResult, error) {
	return typed[schema.SubagentsListResult](ctx, c, "subagents", schema.SubagentsParams{Action: "list", RecentMinutes: recentMinutes}, c.timeout, true, false)
}

// SubagentsKill kills a sub-agent ("last", an index, a key, a label, or "all").
func (c *Client) SubagentsKill(ctx context.Context, target string) (*schema.SubagentsKillResult, error) {
	return typed[schema.SubagentsKillResult](ctx, c, "subagents", schema.SubagentsParams{Action: "kill", Target: target}, c.timeout, false, false)
}

// SubagentsSteer restarts a sub-agent with a new message.
func (c *Client) SubagentsSteer(ctx context.Context, target, message string) (*schema.SubagentsSteerResult, error) {
	return typed[schema.SubagentsSteerResult](ctx, c, "subagents", schema.SubagentsParams{Action: "steer", Target: target, Message: message}, c.timeout, false, false)
}

// AgentsList lists the agent ids the caller may spawn sub-agents as.
func (c *Client) AgentsList(ctx context.Context) (*schema.AgentsListResult, error) {
	return typed[schema.AgentsListResult](ctx, c, "agents_list", schema.AgentsListParams{}, c.timeout, true, true)
}
