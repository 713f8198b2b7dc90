package bench

import (
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// Unless Options.Insecure, the server runs as `serve` does (operator mode,
// per-role users), so the cost of permission checks shows in every
// benchmark and, equally, in the raw baselines: workers connect as the
// worker role, gateways as the gateway role, the bench client as admin.
// Every connection also gets the baselines' own subjects (the raw
// responders, and raw_send_chain's worker and gateway).

// benchSubjects are the raw baselines' subjects (rawEchoSubj, rawStreamSubj).
const benchSubjects = "bench.>"

func (e *env) startAuth() (*auth.Deployment, error) {
	if e.o.Insecure {
		return nil, nil
	}
	return auth.LoadOrCreate(filepath.Join(e.dir, auth.Dir), auth.DefaultAccount)
}

// authOpts are the connect options of a connection with role, none
// with Options.Insecure.
func (e *env) authOpts(role auth.Role, name string) ([]nats.Option, error) {
	if e.auth == nil {
		return nil, nil
	}
	u, err := e.auth.MintWith(auth.DefaultAccount, role, name, e.names.Prefix, 0, func(p *jwt.Permissions) {
		p.Pub.Allow.Add(benchSubjects)
		p.Sub.Allow.Add(benchSubjects)
	})
	if err != nil {
		return nil, err
	}
	return u.Options(), nil
}
