package embedded_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/bus/tlsfiles/tlstest"
)

func startTLS(t *testing.T, tl *embedded.TLS) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// dialTLS connects over TCP with the given TLS options; a nil error means
// a round trip through the server worked.
func dialTLS(t *testing.T, url string, opts ...nats.Option) error {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.NoReconnect(), nats.Timeout(10 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.FlushTimeout(10 * time.Second)
}

// echo answers requests on subject over the in-process connection, which
// needs no TLS setting of its own.
func echo(t *testing.T, s *embedded.Server, subject string) {
	t.Helper()
	nc, err := s.Connect("in-process echo")
	if err != nil {
		t.Fatalf("in-process connection to a TLS server: %v", err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// With --tls-cert and --tls-key the client port speaks only TLS: a client
// that trusts the CA gets in and reaches an in-process responder; one that
// does not, or trusts another CA, is refused by its own verification; a
// plain connection never gets a session.
func TestTLSClientPort(t *testing.T) {
	f := tlstest.New(t)
	s := startTLS(t, &embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey})
	if !strings.HasPrefix(s.URL(), "tls://127.0.0.1:") {
		t.Fatalf("url %s, want tls://", s.URL())
	}
	echo(t, s, "tls.echo")

	nc, err := nats.Connect(s.URL(), nats.RootCAs(f.CA), nats.NoReconnect())
	if err != nil {
		t.Fatalf("client with the CA: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Fatal("connection is not TLS")
	}
	res, err := nc.Request("tls.echo", []byte("hi"), 10*time.Second)
	if err != nil || string(res.Data) != "hi" {
		t.Fatalf("request over TLS: %v %v", res, err)
	}
	// the nats:// form of the URL upgrades, since the server requires TLS
	if err := dialTLS(t, strings.Replace(s.URL(), "tls://", "nats://", 1), nats.RootCAs(f.CA)); err != nil {
		t.Fatalf("nats:// URL with the CA: %v", err)
	}

	var unknown x509.UnknownAuthorityError
	if err := dialTLS(t, s.URL()); !errors.As(err, &unknown) {
		t.Fatalf("client without the CA: %v, want an unknown authority", err)
	}
	if err := dialTLS(t, s.URL(), nats.RootCAs(f.OtherCA)); !errors.As(err, &unknown) {
		t.Fatalf("client with another CA: %v, want an unknown authority", err)
	}

	// a client that speaks plain NATS gets nothing past the INFO line
	conn := plainInfo(t, strings.TrimPrefix(s.URL(), "tls://"))
	_, _ = conn.Write([]byte("CONNECT {}\r\nPING\r\n"))
	buf := make([]byte, 4096)
	n, _ := conn.Read(buf)
	if strings.Contains(string(buf[:n]), "PONG") {
		t.Fatalf("a plain client got a PONG: %s", buf[:n])
	}
}

// plainInfo dials addr over plain TCP and checks that the server's INFO
// requires TLS.
func plainInfo(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	n, _ := conn.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "INFO ") || !strings.Contains(string(buf[:n]), `"tls_required":true`) {
		t.Fatalf("%s: INFO without tls_required: %s", addr, buf[:n])
	}
	return conn
}

// With --tls-ca every client must also present a certificate signed by
// that CA; the in-process connection still needs none.
func TestTLSClientCertificates(t *testing.T) {
	f := tlstest.New(t)
	s := startTLS(t, &embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CA})
	echo(t, s, "tls.echo")
	if err := dialTLS(t, s.URL(), nats.RootCAs(f.CA), nats.ClientCert(f.ClientCert, f.ClientKey)); err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	if err := dialTLS(t, s.URL(), nats.RootCAs(f.CA)); !refusedByServer(err) {
		t.Fatalf("client without a certificate: %v", err)
	}
	if err := dialTLS(t, s.URL(), nats.RootCAs(f.CA), nats.ClientCert(f.OtherCert, f.OtherKey)); !refusedByServer(err) {
		t.Fatalf("client with a certificate from another CA: %v", err)
	}
	bustest.WaitFor(t, 30*time.Second, "only the in-process client connected", func() bool { return s.NS.NumClients() == 1 })
}

// refusedByServer: the server sent a TLS alert, or (with TLS 1.3, where
// the client's side of the handshake completes first) closed the
// connection before the client read it. Go's client sends no certificate
// at all when its issuer is not among the CAs the server asks for, so the
// alert can be "certificate required" for a certificate of another CA too.
func refusedByServer(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" || errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "closed by remote after TLS handshake")
}

// Every way the files can be unusable is refused before the server
// starts, naming the flag and what to do; the data dir is free again.
func TestTLSBadFiles(t *testing.T) {
	f := tlstest.New(t)
	write := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certBytes, _ := os.ReadFile(f.ServerCert)
	expired, expiredKey := f.Leaf(t, "expired", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	missing := filepath.Join(t.TempDir(), "nope.pem")
	cases := []struct {
		name string
		tls  embedded.TLS
		want []string
	}{
		{"missing cert", embedded.TLS{CertFile: missing, KeyFile: f.ServerKey}, []string{"--tls-cert " + missing, "no such file"}},
		{"cert is not PEM", embedded.TLS{CertFile: write("c.pem", "hello"), KeyFile: f.ServerKey}, []string{"--tls-cert", "holds no PEM certificate", "BEGIN CERTIFICATE"}},
		{"cert is a key", embedded.TLS{CertFile: f.ServerKey, KeyFile: f.ServerKey}, []string{"--tls-cert " + f.ServerKey, "holds no PEM certificate"}},
		{"broken cert", embedded.TLS{CertFile: write("b.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), KeyFile: f.ServerKey}, []string{"--tls-cert", "does not parse"}},
		{"missing key", embedded.TLS{CertFile: f.ServerCert, KeyFile: missing}, []string{"--tls-key " + missing, "no such file"}},
		{"key is a cert", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerCert}, []string{"--tls-key " + f.ServerCert, "holds no PEM private key"}},
		{"key of another cert", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ClientKey}, []string{"--tls-key " + f.ClientKey + " is not the private key of --tls-cert " + f.ServerCert}},
		{"encrypted key", embedded.TLS{CertFile: f.ServerCert, KeyFile: write("k.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")}, []string{"--tls-key", "is encrypted", "openssl pkey"}},
		{"cert without key", embedded.TLS{CertFile: f.ServerCert}, []string{"--tls-cert " + f.ServerCert + " needs --tls-key"}},
		{"expired cert", embedded.TLS{CertFile: expired, KeyFile: expiredKey}, []string{"--tls-cert " + expired + " expired on", "renew it"}},
		{"missing CA", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: missing}, []string{"--tls-ca " + missing, "no such file"}},
		{"CA without certificates", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.ServerKey}, []string{"--tls-ca " + f.ServerKey + " holds no PEM certificate"}},
		{"CA is empty", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: write("empty.pem", "")}, []string{"--tls-ca", "holds no PEM certificate"}},
		{"cert with junk before it", embedded.TLS{CertFile: write("j.pem", "junk\n"+string(certBytes)), KeyFile: f.ServerKey}, nil},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0", TLS: &c.tls})
			if c.want == nil {
				if err != nil {
					t.Fatalf("usable files refused: %v", err)
				}
				s.Shutdown()
				return
			}
			if err == nil {
				s.Shutdown()
				t.Fatal("started")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// loopbackPorts picks n free loopback ports.
func loopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		defer l.Close()
	}
	return ports
}

// A 3-node cluster with TLS on its routes elects a leader and replicates
// a stream; clients need the CA and a certificate, as on one server.
func TestTLSCluster(t *testing.T) {
	f := tlstest.New(t)
	ports := loopbackPorts(t, 6)
	c, err := embedded.StartCluster(embedded.ClusterOptions{
		DataDir: t.TempDir(), ClientPorts: ports[:3], RoutePorts: ports[3:], NoLock: true, Sync: embedded.LazySync,
		TLS: &embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	if c.MetaLeader() < 0 {
		t.Fatal("no meta leader")
	}
	for i := range 3 {
		if s := c.Server(i); s.NumRoutes() == 0 || !strings.HasPrefix(c.URL(i), "tls://") {
			t.Fatalf("node %d: %d routes, url %s", i, s.NumRoutes(), c.URL(i))
		}
		routeHandshake(t, f, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3+i])))
	}
	if err := dialTLS(t, c.URL(0), nats.RootCAs(f.CA)); err == nil {
		t.Fatal("a client without a certificate got in")
	}
	nc, js := bustest.ConnectURL(t, c.URLs(), nats.RootCAs(f.CA), nats.ClientCert(f.ClientCert, f.ClientKey))
	defer nc.Close()
	ctx := bustest.Context(t)
	var kv jetstream.KeyValue
	bustest.WaitFor(t, time.Minute, "an R3 bucket", func() bool {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "tls", Replicas: 3})
		return err == nil
	})
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, time.Minute, "every node holding the entry", func() bool {
		for i := range 3 {
			st, err := c.StreamStates(i)
			if err != nil || st["KV_tls"].Msgs != 1 {
				return false
			}
		}
		return true
	})
}

// routeHandshake completes a TLS handshake with a node's route port as a
// peer node would (a plain route would answer with its INFO line instead).
func routeHandshake(t *testing.T, f tlstest.Files, addr string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(f.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("route %s: %v", addr, err)
	}
	_ = conn.Close()
}

// A certificate the nodes would refuse from each other is refused before
// any node starts, with what to change, instead of a minute's wait for a
// leader that never comes.
func TestTLSClusterPeerChecks(t *testing.T) {
	f := tlstest.New(t)
	serverOnly, serverOnlyKey := f.Leaf(t, "server-only", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	cases := []struct {
		name, host string
		tls        embedded.TLS
		want       string
	}{
		{"CA that did not sign it", "", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.OtherCA}, "is not signed by --tls-ca " + f.OtherCA},
		{"no CA, private cert", "", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey}, "pass --tls-ca with the CA that signed it"},
		{"server auth only", "", embedded.TLS{CertFile: serverOnly, KeyFile: serverOnlyKey, CAFile: f.CA}, "extendedKeyUsage serverAuth, clientAuth"},
		{"client auth only", "localhost", embedded.TLS{CertFile: f.ClientCert, KeyFile: f.ClientKey, CAFile: f.CA}, "extendedKeyUsage serverAuth, clientAuth"},
		{"another address", "127.0.0.2", embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CA}, "is not valid for 127.0.0.2, the address the cluster's nodes dial each other on"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ports := loopbackPorts(t, 6)
			cl, err := embedded.StartCluster(embedded.ClusterOptions{DataDir: t.TempDir(), Host: c.host, ClientPorts: ports[:3], RoutePorts: ports[3:], NoLock: true, TLS: &c.tls})
			if err == nil {
				cl.Shutdown()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}
