package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/bus/tlsfiles/tlstest"
)

func tlsServer(t *testing.T, tl *embedded.TLS) string {
	t.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s.URL()
}

// Each way a client's TLS can fail ends in one line saying what to change.
func TestClientTLSErrors(t *testing.T) {
	f := tlstest.New(t)
	plain := tlsServer(t, nil)
	withTLS := tlsServer(t, &embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey})
	verifying := tlsServer(t, &embedded.TLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CA})
	cases := []struct {
		name string
		url  string
		tls  clientTLS
		want string // "" connects
	}{
		{"CA and a TLS server", withTLS, clientTLS{ca: f.CA}, ""},
		{"nats:// URL upgrades", strings.Replace(withTLS, "tls://", "nats://", 1), clientTLS{ca: f.CA}, ""},
		{"no CA", withTLS, clientTLS{}, "the server's certificate is not signed by a CA this system trusts: pass --tls-ca with the CA that signed it"},
		{"another CA", withTLS, clientTLS{ca: f.OtherCA}, "the server's certificate is not signed by --tls-ca " + f.OtherCA},
		{"CA and a plain server", plain, clientTLS{ca: f.CA}, "the server does not use TLS, but --tls-ca asks for it: leave out --tls-ca"},
		{"client certificate", verifying, clientTLS{ca: f.CA, cert: f.ClientCert, key: f.ClientKey}, ""},
		{"no client certificate", verifying, clientTLS{ca: f.CA}, "the server requires a client certificate: pass --tls-cert and --tls-key"},
		{"client certificate of another CA", verifying, clientTLS{ca: f.CA, cert: f.OtherCert, key: f.OtherKey}, "the server refused the certificate of --tls-cert " + f.OtherCert},
		{"certificate without key", verifying, clientTLS{ca: f.CA, cert: f.ClientCert}, "--tls-cert " + f.ClientCert + " needs --tls-key"},
		{"key of another certificate", verifying, clientTLS{ca: f.CA, cert: f.ClientCert, key: f.ServerKey}, "is not the private key of --tls-cert"},
		{"CA file without certificates", withTLS, clientTLS{ca: f.ClientKey}, "--tls-ca " + f.ClientKey + " holds no PEM certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc, err := c.tls.connect(c.url, "tls test")
			if c.want == "" {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				nc.Close()
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q does not say %q in one line", err, c.want)
			}
		})
	}
}

// Auth without TLS beyond loopback is a warning naming what crosses the
// network; on loopback or with TLS there is nothing to say.
func TestWarnCleartext(t *testing.T) {
	for _, c := range []struct {
		listen string
		tls    bool
		warn   bool
	}{
		{"0.0.0.0:4222", false, true},
		{"10.1.2.3:4222", false, true},
		{"[::]:4222", false, true},
		{"0.0.0.0:4222", true, false},
		{"127.0.0.1:4222", false, false},
		{"localhost:4222", false, false},
		{"[::1]:4222", false, false},
		{":4222", false, false},
	} {
		var buf bytes.Buffer
		warnCleartext(slog.New(slog.NewTextHandler(&buf, nil)), c.listen, c.tls)
		if got := strings.Contains(buf.String(), "credentials, tokens and transcripts cross the network in clear text"); got != c.warn {
			t.Errorf("--listen %s tls %v: warned %v: %q", c.listen, c.tls, got, buf.String())
		}
	}
}
