package bench

import (
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// With Options.Auth the server runs as `serve --auth` does (operator mode,
// per-role users), so the cost of permission checks shows in every
// benchmark and, equally, in the raw baselines: workers connect as the
// worker role, gateways as the gateway role, the bench client as admin.
// The client and the raw responders also get the baselines' own subjects.

// benchSubjects are the raw baselines' subjects (rawEchoSubj, rawStreamSubj).
const benchSubjects = "bench.>"

func (e *env) startAuth() (*auth.Deployment, error) {
	if !e.o.Auth {
		return nil, nil
	}
	return auth.LoadOrCreate(filepath.Join(e.dir, auth.Dir), auth.DefaultAccount)
}

// authOpts are the connect options of a connection with role, none
// without Options.Auth.
func (e *env) authOpts(role auth.Role, name string) ([]nats.Option, error) {
	if e.auth == nil {
		return nil, nil
	}
	u, err := e.auth.MintWith(auth.DefaultAccount, role, name, e.names.Prefix, 0, func(p *jwt.Permissions) {
		if role == auth.RoleAdmin {
			p.Pub.Allow.Add(benchSubjects)
			p.Sub.Allow.Add(benchSubjects)
		}
	})
	if err != nil {
		return nil, err
	}
	return u.Options(), nil
}
