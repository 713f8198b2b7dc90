// Package gatewaytest starts gateways beside a handlerstest stack, for
// tests whose tools need runs executed (sessions_send, spawns, notices).
// It is apart from handlerstest because the gateway's own tests use
// handlerstest, and a helper there that imported the gateway would make an
// import cycle.
package gatewaytest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// Start starts a gateway named id on nc (the stack's connection, or one of
// its own to s.Server) with the stack's config and operator, and stops it
// when the test ends. log nil discards the gateway's log. The start is
// given a minute. As under serve, exec runs get NATS users of their own
// (revoked on the stack's server) unless o names another issuer.
func Start(t testing.TB, s *handlerstest.Stack, nc *nats.Conn, id string, log *slog.Logger, o gateway.Options) *gateway.Gateway {
	t.Helper()
	if d := s.Server.Deployment(); o.RunCredentials == nil && d != nil {
		ru, err := d.RunUsers(auth.DefaultAccount, s.Config.Bus.Prefix, s.Server.UpdateAccount)
		if err != nil {
			t.Fatal(err)
		}
		o.RunCredentials = ru
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := gateway.StartWithOptions(ctx, nc, s.Config, s.Operator, id, log, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return g
}
