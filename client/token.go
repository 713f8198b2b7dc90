package client

import (
	"context"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

// TokenSource gives the caller token (header Sessionbus-Token) of each call.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

type staticToken string

func (t staticToken) Token(context.Context) (string, error) { return string(t), nil }

// StaticToken is a token minted elsewhere (`sessionbus token --as KEY`, or
// the gateway's for a run). It is used until it expires; then the worker
// answers 401.
func StaticToken(token string) TokenSource { return staticToken(token) }

// minted mints tokens with the operator key and mints anew when half the
// token's life has passed, so a long-lived client never sends an expired one.
type minted struct {
	op     *bus.Operator
	caller bus.Caller
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	tok     string
	renewAt time.Time
}

// DefaultTokenTTL is how long a minted token is valid.
const DefaultTokenTTL = 10 * time.Minute

// Minted mints caller tokens for caller with the operator key (ttl 0:
// DefaultTokenTTL). Whoever holds the operator key may speak as any
// session: use it in trusted tools (the CLI, an MCP server on the
// operator's machine), and hand agents StaticToken instead.
func Minted(op *bus.Operator, caller bus.Caller, ttl time.Duration) TokenSource {
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	return &minted{op: op, caller: caller, ttl: ttl, now: time.Now}
}

// FromCreds is Minted with the operator key read from a credentials file
// (the one `sessionbus serve` writes into its data dir, operator.creds).
func FromCreds(path string, caller bus.Caller, ttl time.Duration) (TokenSource, error) {
	op, err := bus.LoadOperator(path)
	if err != nil {
		return nil, err
	}
	return Minted(op, caller, ttl), nil
}

func (m *minted) Token(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.tok != "" && now.Before(m.renewAt) {
		return m.tok, nil
	}
	tok, err := m.op.Mint(m.caller, m.ttl)
	if err != nil {
		return "", err
	}
	m.tok, m.renewAt = tok, now.Add(m.ttl/2)
	return tok, nil
}
