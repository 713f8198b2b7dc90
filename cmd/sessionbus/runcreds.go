package main

import (
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/gateway"
)

// runCredentials is what gives serve's gateway's exec runs a NATS user of
// their own: users of the deployment's account, revoked by pushing the
// account to the embedded server (or every node of the embedded cluster).
// nil without NATS auth (no deployment), where runs need none.
func runCredentials(push func(accountJWT string) error, d *auth.Deployment, prefix string) (gateway.RunCredentials, error) {
	if d == nil {
		return nil, nil
	}
	return d.RunUsers(auth.DefaultAccount, prefix, push)
}
