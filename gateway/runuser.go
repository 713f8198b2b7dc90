package gateway

import (
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/runtime"
)

// RunCredentials issues each exec run a NATS user of its own, so the
// process a turn starts holds credentials that end with its run (serve
// wires auth.RunUsers, backed by its NATS keys and server). Issue returns
// the user's credentials file and inbox prefix, and revoke, which the
// gateway calls when the turn returns: done, failed, timed out, killed or
// interrupted by a shutdown.
type RunCredentials interface {
	Issue(runID string, ttl time.Duration) (creds []byte, inbox string, revoke func() error, err error)
}

// runUser is one run's use of RunCredentials: issue is what the turn's
// runtime calls (runtime.Turn.NATSUser), end revokes what it issued.
type runUser struct {
	g       *Gateway
	runID   string
	mu      sync.Mutex
	revokes []func() error
}

func (u *runUser) issue(ttl time.Duration) (*runtime.NATSUser, error) {
	// no user outlives the longest token: past it the run can call no tool
	creds, inbox, revoke, err := u.g.opts.RunCredentials.Issue(u.runID, min(ttl, bus.MaxTokenTTL))
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.revokes = append(u.revokes, revoke)
	u.mu.Unlock()
	return &runtime.NATSUser{Creds: creds, Inbox: inbox}, nil
}

// end revokes the users issued; it waits for the revocation, so a run is
// recorded ended only once its user is refused.
func (u *runUser) end() {
	u.mu.Lock()
	rs := u.revokes
	u.revokes = nil
	u.mu.Unlock()
	for _, revoke := range rs {
		if err := revoke(); err != nil {
			u.g.log.Warn("gateway: the run's NATS user is not revoked", "run", u.runID, "err", err)
		}
	}
}

// runUserFor is the NATS user hook of an exec run's turn and the function
// that ends it; nil and a no-op when the gateway has no RunCredentials or
// the agent's runtime hands out no credentials.
func (g *Gateway) runUserFor(agentID, runID string) (issue func(time.Duration) (*runtime.NATSUser, error), end func()) {
	if g.opts.RunCredentials == nil || !g.needsToken[agentID] {
		return nil, func() {}
	}
	u := &runUser{g: g, runID: runID}
	return u.issue, u.end
}

// noteRunUsers says once, at start, that exec runs get no NATS user of
// their own when nothing issues them.
func (g *Gateway) noteRunUsers(o Options) {
	if o.RunCredentials != nil {
		return
	}
	for _, exec := range g.needsToken {
		if exec {
			g.log.Info("gateway: exec runs get no NATS user of their own (no NATS account key here; serve --auth issues them): a turn's process gets the NATS URL and its run token, and on a server with NATS auth needs credentials passed with exec.env")
			return
		}
	}
}
