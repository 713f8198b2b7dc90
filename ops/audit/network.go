package audit

import (
	"fmt"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// The fixes of the server's checks, one place to keep them in step with
// serve's flags.
const (
	fixAuth = "restart it without --insecure (`sessionbus serve` requires credentials by default); for a nats-server of your own, include the block `sessionbus creds --server-config` prints (docs/security.md)"
	fixTLS  = "listen on loopback only (`sessionbus serve --listen 127.0.0.1:4222`), or give the nats-server TLS (a `tls { cert_file, key_file }` block) and connect with tls://"
)

// reached is the probe of a server that answered, nil when the audit did
// not probe or no server answered.
func reached(t *Target) *Probe {
	if t.Probe == nil || t.Probe.Err != nil {
		return nil
	}
	return t.Probe
}

// unreachable: the server did not answer, so nothing about it is known:
// an audit that passed only because its server was down would mislead.
func unreachable(t *Target) []Issue {
	if t.Probe == nil || t.Probe.Err == nil {
		return nil
	}
	return []Issue{{
		Detail: fmt.Sprintf("No NATS server answered at %s (%v): the checks of auth, TLS and credentials did not run.", t.Probe.Server, t.Probe.Err),
		Fix:    "start the server, or pass the one to audit with --server URL",
	}}
}

// authOff: a connection without credentials got in. Nothing else then
// stops a client: it can read every transcript, queue runs, capture
// callers' tokens and delete every stream.
func authOff(t *Target) []Issue {
	p := reached(t)
	if p == nil || !p.Anonymous {
		return nil
	}
	return []Issue{{
		Detail: fmt.Sprintf("A connection to %s with no credentials was accepted: any client that reaches the port can read and change every session, queue runs and delete every stream.", p.URL),
		Fix:    fixAuth,
	}}
}

// plaintextExposed: the server can be reached from other hosts (it
// listens beyond loopback, or the audit itself reached it over the
// network) and does not require TLS, so caller tokens, tool requests
// and transcripts cross the network in clear for anyone on the path.
func plaintextExposed(t *Target) []Issue {
	p := reached(t)
	if p == nil || p.TLSRequired {
		return nil
	}
	where := ""
	switch host := urlHost(p.URL); {
	case p.ListenHost != "" && !isLoopback(p.ListenHost):
		where = fmt.Sprintf("listens on %s", p.ListenHost)
	case host != "" && !isLoopback(host):
		where = fmt.Sprintf("was reached at %s", host)
	default:
		return nil
	}
	return []Issue{{
		Detail: fmt.Sprintf("The server at %s %s, beyond loopback, and does not require TLS: caller tokens (which can be replayed until they expire), tool requests and transcripts cross the network in clear.", p.URL, where),
		Fix:    fixTLS,
	}}
}

// adminCredsRemote: the caller connects with the admin's user (every
// subject, and the token signing key in the same file) to a server over
// the network. Not a hole, but the file is the deployment's master key:
// it should stay on the server host, and remote reads need only ops.
func adminCredsRemote(t *Target) []Issue {
	p := reached(t)
	if p == nil || p.CredsURL == "" || p.CredsRole != string(auth.RoleAdmin) {
		return nil
	}
	host := urlHost(p.CredsURL)
	if host == "" || isLoopback(host) {
		return nil
	}
	return []Issue{{
		Detail: fmt.Sprintf("%s holds the admin's NATS user (every subject; serve's admin file also carries the token signing key) and was used to connect to %s over the network.", t.CredsPath, host),
		Fix:    "on the server host, `sessionbus creds --out ops.creds ops`, and pass --creds ops.creds from elsewhere (audit, inspect and replay need no more)",
	}}
}
