package main

import (
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/gateway"
)

// runCredentials is what gives serve's gateway's exec runs a NATS user of
// their own: users of the deployment's account, revoked on srv itself.
// nil without NATS auth (no deployment), where runs need none.
func runCredentials(srv *embedded.Server, d *auth.Deployment, prefix string) (gateway.RunCredentials, error) {
	if d == nil {
		return nil, nil
	}
	return d.RunUsers(auth.DefaultAccount, prefix, srv.UpdateAccount)
}
