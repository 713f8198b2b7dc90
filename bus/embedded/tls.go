package embedded

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus/tlsfiles"
)

// TLS is the certificate a server presents on its client port (and a
// cluster node on its routes too), as PEM files.
type TLS struct {
	CertFile string // the certificate, optionally followed by its chain
	KeyFile  string // its private key
	// CAFile, when set, makes the client port require a certificate signed
	// by a CA in it from every client. A cluster's nodes verify each
	// other's certificates against it (without it, against the system's
	// roots).
	CAFile string
}

// check reads the files, so an unusable one is refused with a line
// naming its flag before nats-server sees it.
func (t *TLS) check() error {
	if _, err := tlsfiles.KeyPair(t.CertFile, t.KeyFile); err != nil {
		return err
	}
	if t.CAFile != "" {
		if _, err := tlsfiles.CAPool(t.CAFile); err != nil {
			return err
		}
	}
	return nil
}

// clientPortConfig is the client port's TLS, as nats-server builds it
// from a tls block: client certificates required and verified when there
// is a CA.
func (t *TLS) clientPortConfig() (*tls.Config, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	c, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: t.CAFile != ""})
	if err != nil {
		return nil, fmt.Errorf("TLS with --tls-cert %s: %v", t.CertFile, err)
	}
	return c, nil
}

// routeConfig is a route's TLS, as nats-server builds it from a cluster
// block's tls: a node dials its peers and is dialed by them, so it
// verifies the other end both ways, against the same CA.
func (t *TLS) routeConfig() (*tls.Config, error) {
	c, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile})
	if err != nil {
		return nil, fmt.Errorf("route TLS with --tls-cert %s: %v", t.CertFile, err)
	}
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.RootCAs = c.ClientCAs
	return c, nil
}

// apply turns TLS on for the client port of sopts.
func (t *TLS) apply(sopts *server.Options) error {
	c, err := t.clientPortConfig()
	if err != nil {
		return err
	}
	sopts.TLSConfig = c
	sopts.TLSVerify = t.CAFile != ""
	sopts.TLSCert, sopts.TLSKey, sopts.TLSCaCert = t.CertFile, t.KeyFile, t.CAFile
	return nil
}

// inProcessURL is the URL an in-process connection dials. The server
// offers such a connection TLS without requiring it, and there is no wire
// to protect; a tls:// URL would make nats.go insist on a handshake that
// needs the CA (and, with one, a client certificate). So it is nats://,
// which nats.go also reports as the connection's ConnectedUrl: a client
// handed that URL still ends up on TLS, because the server's port requires
// it.
func (s *Server) inProcessURL() string {
	return strings.Replace(s.URL(), "tls://", "nats://", 1)
}

// nodeTLS is a cluster's TLS, built once and given to every node each
// time it starts.
type nodeTLS struct {
	clientPort, routes *tls.Config
	verify             bool // client certificates required
}

// useTLS prepares the cluster's TLS (t nil: none). The nodes dial each
// other at host and each verifies the other as a server and as a client:
// a certificate that fails either never forms the cluster, and start-up
// would only time out waiting for a leader, so it is checked first.
func (c *Cluster) useTLS(t *TLS, host string) error {
	if t == nil {
		return nil
	}
	cp, err := t.clientPortConfig()
	if err != nil {
		return err
	}
	if err := t.checkPeers(host); err != nil {
		return err
	}
	rc, err := t.routeConfig()
	if err != nil {
		return err
	}
	c.tls = &nodeTLS{clientPort: cp, routes: rc, verify: t.CAFile != ""}
	return nil
}

// nodeOptions adds the cluster's TLS to a copy of a node's options; each
// start gets its own tls.Config, as the server changes it as it runs.
func (c *Cluster) nodeOptions(o *server.Options) {
	if c.tls == nil {
		return
	}
	o.TLSConfig = c.tls.clientPort.Clone()
	o.TLSVerify = c.tls.verify
	o.Cluster.TLSConfig = c.tls.routes.Clone()
}

// scheme is the client URLs' scheme: tls:// when the nodes require TLS,
// which nats.go then uses without being told.
func (c *Cluster) scheme() string {
	if c.tls != nil {
		return "tls"
	}
	return "nats"
}

// checkPeers verifies the certificate as a node verifies a peer's: for
// host as a server, and as a client, against the CA (or the system's
// roots without one).
func (t *TLS) checkPeers(host string) error {
	pair, err := tlsfiles.KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return err
	}
	var roots *x509.CertPool
	if t.CAFile != "" {
		if roots, err = tlsfiles.CAPool(t.CAFile); err != nil {
			return err
		}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			opts.DNSName = host
		}
		if _, err := pair.Leaf.Verify(opts); err != nil {
			return t.peerError(host, err)
		}
	}
	return nil
}

// peerError says why the nodes would refuse each other's certificate.
func (t *TLS) peerError(host string, err error) error {
	var unknown x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown) && t.CAFile != "":
		return fmt.Errorf("--tls-cert %s is not signed by --tls-ca %s, which the cluster's nodes verify each other with: pass the CA that signed it", t.CertFile, t.CAFile)
	case errors.As(err, &unknown):
		return fmt.Errorf("--tls-cert %s is not signed by a CA this system trusts, and the cluster's nodes verify each other's certificates: pass --tls-ca with the CA that signed it", t.CertFile)
	case errors.As(err, &badHost):
		return fmt.Errorf("--tls-cert %s is not valid for %s, the address the cluster's nodes dial each other on: make it with %s among its subject alternative names, or --listen on a name it holds", t.CertFile, host, host)
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return fmt.Errorf("--tls-cert %s does not allow both server and client authentication, and each cluster node is the server of some routes and the client of others: make it with extendedKeyUsage serverAuth, clientAuth", t.CertFile)
	}
	return fmt.Errorf("--tls-cert %s would not be accepted by the other cluster nodes: %v", t.CertFile, err)
}
