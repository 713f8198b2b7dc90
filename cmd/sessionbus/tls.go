package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/bus/tlsfiles"
)

// serverFlags are --server and the TLS files a connection to it uses: the
// flags of every command that talks to a server.
type serverFlags struct {
	url *string
	tls *clientTLS
}

func newServerFlags(fs *flag.FlagSet) serverFlags {
	return serverFlags{url: fs.String("server", defaultServer(), "NATS server URL"), tls: addClientTLS(fs)}
}

// connect connects to --server with the TLS files and opts.
func (s serverFlags) connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	return s.tls.connect(*s.url, name, opts...)
}

// clientTLS is what a client's connection adds for TLS: the CA that signed
// the server's certificate (when this system does not trust it), and a
// certificate of the client's own for a server that requires one. Without
// them a connection still uses TLS when the server requires it, verified
// against the system's roots.
type clientTLS struct{ ca, cert, key string }

// addClientTLS defines --tls-ca, --tls-cert and --tls-key; the environment
// gives their defaults, as it gives --server's and --creds'.
func addClientTLS(fs *flag.FlagSet) *clientTLS {
	t := &clientTLS{}
	fs.StringVar(&t.ca, "tls-ca", envOr("SESSIONBUS_TLS_CA", ""), "CA certificate (PEM) that signed the server's TLS certificate, when this system does not trust that CA; env SESSIONBUS_TLS_CA")
	fs.StringVar(&t.cert, "tls-cert", envOr("SESSIONBUS_TLS_CERT", ""), "client certificate (PEM), for a server that requires one (serve --tls-ca); env SESSIONBUS_TLS_CERT")
	fs.StringVar(&t.key, "tls-key", envOr("SESSIONBUS_TLS_KEY", ""), "private key of --tls-cert (PEM); env SESSIONBUS_TLS_KEY")
	return t
}

// options are the connection's TLS options, none without files. The files
// are read now, so an unusable one is its own one-line error, and again at
// each reconnect, so a renewed certificate is picked up.
func (t *clientTLS) options() ([]nats.Option, error) {
	if err := tlsfiles.CheckPair(t.cert, t.key); err != nil {
		return nil, err
	}
	var cert nats.TLSCertHandler
	var roots nats.RootCAsHandler
	if t.cert != "" {
		if _, err := tlsfiles.KeyPair(t.cert, t.key); err != nil {
			return nil, err
		}
		cert = func() (tls.Certificate, error) { return tlsfiles.KeyPair(t.cert, t.key) }
	}
	if t.ca != "" {
		if _, err := tlsfiles.CAPool(t.ca); err != nil {
			return nil, err
		}
		roots = func() (*x509.CertPool, error) { return tlsfiles.CAPool(t.ca) }
	}
	if cert == nil && roots == nil {
		return nil, nil
	}
	return []nats.Option{nats.ClientTLSConfig(cert, roots)}, nil
}

// connect connects to url with the TLS files and opts, and says what to
// change when TLS is what failed.
func (t *clientTLS) connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	topts, err := t.options()
	if err != nil {
		return nil, err
	}
	nc, err := connect(url, name, append(opts, topts...)...)
	if err != nil {
		return nil, t.explain(url, err)
	}
	return nc, nil
}

// explain turns a TLS failure into what to change; any other error is
// returned as it is.
func (t *clientTLS) explain(url string, err error) error {
	var unknown x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	var remote *net.OpError
	// with TLS 1.3 the client's side of the handshake ends first, so a
	// server refusing the client's certificate may only close the
	// connection before the client reads why
	refused := errors.As(err, &remote) && remote.Op == "remote error" ||
		errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "closed by remote after TLS handshake")
	switch {
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("connect to %s: the server does not use TLS, but %s asks for it: leave out %[2]s (and the SESSIONBUS_TLS_* variables), or start serve with --tls-cert and --tls-key", url, t.flagNames())
	case errors.As(err, &unknown) && t.ca != "":
		return fmt.Errorf("connect to %s: the server's certificate is not signed by --tls-ca %s: pass the CA that signed the server's certificate", url, t.ca)
	case errors.As(err, &unknown):
		return fmt.Errorf("connect to %s: the server's certificate is not signed by a CA this system trusts: pass --tls-ca with the CA that signed it (or set SESSIONBUS_TLS_CA)", url)
	case errors.As(err, &badHost):
		return fmt.Errorf("connect to %s: the server's certificate is not valid for %s: pass a --server name the certificate holds, or give the server a certificate for %s", url, badHost.Host, badHost.Host)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("connect to %s: the server's certificate has expired or is not valid yet (%v): renew it, or check this machine's clock", url, invalid)
	case refused && t.cert == "":
		return fmt.Errorf("connect to %s: the server requires a client certificate: pass --tls-cert and --tls-key with one signed by the CA the server verifies clients with (serve's --tls-ca)", url)
	case refused:
		return fmt.Errorf("connect to %s: the server refused the certificate of --tls-cert %s: pass one signed by the CA it verifies clients with (serve's --tls-ca)", url, t.cert)
	}
	return err
}

// selfTLS is how serve --cluster connects to its own nodes over TCP: it
// verifies them as the nodes verify each other, and presents the nodes'
// certificate where they require one from clients.
func selfTLS(t *embedded.TLS) *clientTLS {
	if t == nil || t.CAFile == "" {
		return &clientTLS{}
	}
	return &clientTLS{ca: t.CAFile, cert: t.CertFile, key: t.KeyFile}
}

// flagNames lists the TLS flags in use, for a message about them.
func (t *clientTLS) flagNames() string {
	var set []string
	if t.ca != "" {
		set = append(set, "--tls-ca")
	}
	if t.cert != "" {
		set = append(set, "--tls-cert")
	}
	return strings.Join(set, " and ")
}

// serveTLSFlags defines serve's --tls-cert, --tls-key and --tls-ca; the
// returned function, called after parsing, gives the server's TLS (nil:
// none) or an error for a combination that cannot work (exit 2). No
// environment defaults: SESSIONBUS_TLS_* name a client's files, and a
// server that took a client's CA would start requiring client certificates.
func serveTLSFlags(fs *flag.FlagSet) func() (*embedded.TLS, error) {
	t := &embedded.TLS{}
	fs.StringVar(&t.CertFile, "tls-cert", "", "serve TLS on the client port (and a cluster's routes) with this certificate (PEM; see docs/security.md#tls)")
	fs.StringVar(&t.KeyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.StringVar(&t.CAFile, "tls-ca", "", "with --tls-cert: require every client to present a certificate signed by this CA (PEM); a cluster's nodes verify each other with it")
	return func() (*embedded.TLS, error) {
		if err := tlsfiles.CheckPair(t.CertFile, t.KeyFile); err != nil {
			return nil, err
		}
		if t.CAFile != "" && t.CertFile == "" {
			return nil, fmt.Errorf("--tls-ca %s verifies client certificates on a TLS port: pass --tls-cert and --tls-key too", t.CAFile)
		}
		if t.CertFile == "" {
			return nil, nil
		}
		return t, nil
	}
}

// warnCleartext says, for a server with auth listening beyond loopback
// without TLS, what crosses the network readable to anyone on the path.
func warnCleartext(log *slog.Logger, listen string, tlsOn bool) {
	if tlsOn || loopbackListen(listen) {
		return
	}
	log.Warn("TLS is off on a port beyond loopback: credentials, tokens and transcripts cross the network in clear text, readable and changeable by anyone on the path; pass --tls-cert and --tls-key (docs/security.md#tls)", "listen", listen)
}

// loopbackListen reports whether a --listen address is reachable only from
// this machine (an empty host binds 127.0.0.1).
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true // embedded.Start says what is wrong with it
	}
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
