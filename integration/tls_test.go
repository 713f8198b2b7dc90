package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus/tlsfiles/tlstest"
)

// serve --tls-cert --tls-key: the ready line is the tls:// URL;
// call, inspect (the CA from SESSIONBUS_TLS_CA) and the stock nats CLI
// (--tlsca, as docs/ops.md shows) get in with the CA; without it, or with
// another CA, the client says what to pass.
func TestServeTLS(t *testing.T) {
	sb, nats := binary(t, "sessionbus"), binary(t, "nats")
	f := tlstest.New(t)
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey)
	// the ready line is the tls:// URL of the port the server bound
	url, addr := boundURL(t, srv.waitLine(t, "ready "), "tls")
	creds := filepath.Join(data, "operator.creds")

	out, errOut, code := run(t, "", sb, "call", "--server", url, "--creds", creds, "--tls-ca", f.CA, "sessions_list")
	if code != 0 || !strings.Contains(out, `"sessions"`) {
		t.Fatalf("call with --tls-ca: %d %s %s", code, out, errOut)
	}
	_, errOut, code = run(t, "", sb, "call", "--server", url, "--creds", creds, "sessions_list")
	if code != 1 || !strings.Contains(errOut, "the server's certificate is not signed by a CA this system trusts: pass --tls-ca with the CA that signed it") {
		t.Fatalf("call without --tls-ca: %d %s", code, errOut)
	}
	_, errOut, code = run(t, "", sb, "call", "--server", "nats://"+addr, "--creds", creds, "--tls-ca", f.OtherCA, "sessions_list")
	if code != 1 || !strings.Contains(errOut, "the server's certificate is not signed by --tls-ca "+f.OtherCA) {
		t.Fatalf("call with another CA: %d %s", code, errOut)
	}

	t.Setenv("SESSIONBUS_TLS_CA", f.CA)
	out, errOut, code = run(t, "", sb, "inspect", "--server", url, "--creds", creds)
	if code != 0 || !strings.Contains(out, "SB_TRANSCRIPTS") {
		t.Fatalf("inspect with SESSIONBUS_TLS_CA: %d %s %s", code, out, errOut)
	}

	ops := filepath.Join(data, "creds", "ops.creds")
	out, errOut, code = run(t, "", nats, "-s", url, "--tlsca", f.CA, "--creds", ops, "--inbox-prefix", inboxOf(t, ops), "--js-api-prefix", "sb.ops.js", "stream", "ls", "--names")
	if code != 0 || !strings.Contains(out, "SB_TRANSCRIPTS") {
		t.Fatalf("nats --tlsca stream ls: %d %s %s", code, out, errOut)
	}
}

// serve --tls-ca requires a client certificate signed by that CA: a worker
// process and call present one; call without one, or with one from
// another CA, is told what to pass.
func TestServeTLSClientCertificates(t *testing.T) {
	sb := binary(t, "sessionbus")
	f := tlstest.New(t)
	data := t.TempDir()
	srv := start(t, "serve", "--no-gateway", "--data", data, "--listen", anyPort, "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-ca", f.CA)
	url, _ := boundURL(t, srv.waitLine(t, "ready "), "tls")
	creds := filepath.Join(data, "operator.creds")
	clientTLS := []string{"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}

	gw := start(t, append([]string{"gateway", "--server", url, "--creds", filepath.Join(data, "creds", "gateway.creds"), "--id", "gw-tls"}, clientTLS...)...)
	gw.waitLine(t, "ready ")
	_, errOut, code := run(t, `{"role":"user","content":"hello tls"}`, sb, append(append([]string{"import", "--server", url, "--creds", creds}, clientTLS...), "agent:main:main")...)
	if code != 0 {
		t.Fatalf("import with a client certificate: %d %s", code, errOut)
	}
	out, errOut, code := run(t, "", sb, append(append([]string{"call", "--server", url, "--creds", creds}, clientTLS...), "sessions_send", `{"sessionKey":"agent:main:main","message":"hi","timeoutSeconds":30}`)...)
	if code != 0 || !strings.Contains(out, `"status": "ok"`) {
		t.Fatalf("sessions_send through a gateway process on TLS: %d %s %s", code, out, errOut)
	}

	_, errOut, code = run(t, "", sb, "call", "--server", url, "--creds", creds, "--tls-ca", f.CA, "sessions_list")
	if code != 1 || !strings.Contains(errOut, "the server requires a client certificate: pass --tls-cert and --tls-key") {
		t.Fatalf("call without a client certificate: %d %s", code, errOut)
	}
	_, errOut, code = run(t, "", sb, "call", "--server", url, "--creds", creds, "--tls-ca", f.CA, "--tls-cert", f.OtherCert, "--tls-key", f.OtherKey, "sessions_list")
	if code != 1 || !strings.Contains(errOut, "the server refused the certificate of --tls-cert "+f.OtherCert) {
		t.Fatalf("call with a certificate of another CA: %d %s", code, errOut)
	}
}

// Flags that cannot work together exit 2, files that cannot be used exit 1,
// each with one line naming the flag; auth beyond loopback without TLS
// starts with a warning, and with TLS without one.
func TestServeTLSBadInput(t *testing.T) {
	sb := binary(t, "sessionbus")
	f := tlstest.New(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cert without key", []string{"--tls-cert", f.ServerCert}, 2, "--tls-cert " + f.ServerCert + " needs --tls-key"},
		{"key without cert", []string{"--tls-key", f.ServerKey}, 2, "--tls-key " + f.ServerKey + " needs --tls-cert"},
		{"CA without cert", []string{"--tls-ca", f.CA}, 2, "--tls-ca " + f.CA + " verifies client certificates on a TLS port: pass --tls-cert and --tls-key too"},
		{"demo", []string{"--demo", "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey}, 2, "drop --tls-cert or --demo"},
		{"missing cert", []string{"--tls-cert", missing, "--tls-key", f.ServerKey}, 1, "--tls-cert " + missing + ": no such file or directory"},
		{"garbage cert", []string{"--tls-cert", garbage, "--tls-key", f.ServerKey}, 1, "--tls-cert " + garbage + " holds no PEM certificate"},
		{"garbage key", []string{"--tls-cert", f.ServerCert, "--tls-key", garbage}, 1, "--tls-key " + garbage + " holds no PEM private key"},
		{"key of another cert", []string{"--tls-cert", f.ServerCert, "--tls-key", f.ClientKey}, 1, "--tls-key " + f.ClientKey + " is not the private key of --tls-cert " + f.ServerCert},
		{"CA without certificates", []string{"--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-ca", garbage}, 1, "--tls-ca " + garbage + " holds no PEM certificate"},
		{"cluster CA that did not sign the cert", []string{"--cluster", "3", "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-ca", f.OtherCA}, 1, "is not signed by --tls-ca " + f.OtherCA},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--data", t.TempDir()}, c.args...)
			if c.args[0] == "--cluster" {
				args = append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", clusterBasePort(t)))
			} else {
				args = append(args, "--listen", anyPort)
			}
			_, errOut, code := run(t, "", sb, args...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			if code != c.code || !strings.HasPrefix(last, "sessionbus serve: ") || !strings.Contains(last, c.want) {
				t.Fatalf("exit %d, last line %q; want %d and %q (stderr: %s)", code, last, c.code, c.want, errOut)
			}
		})
	}

	// the warning: every interface, auth, no TLS; then with TLS
	plain := start(t, "serve", "--no-gateway", "--data", t.TempDir(), "--listen", "0.0.0.0:0")
	plain.waitLine(t, "ready ")
	waitStderr(t, plain.cmd, "credentials, tokens and transcripts cross the network in clear text")
	withTLS := start(t, "serve", "--no-gateway", "--data", t.TempDir(), "--listen", "0.0.0.0:0", "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey)
	withTLS.waitLine(t, "ready ")
	if errOut := withTLS.cmd.Stderr.(*syncWriter).String(); strings.Contains(errOut, "clear text") {
		t.Fatalf("warned with TLS on: %s", errOut)
	}
}

// serve --cluster 3 with TLS: the routes and every client port use it, the
// ready line lists tls:// URLs, and a client with a certificate calls
// through any node.
func TestServeClusterTLS(t *testing.T) {
	sb := binary(t, "sessionbus")
	f := tlstest.New(t)
	data := t.TempDir()
	p := clusterBasePort(t)
	srv := start(t, "serve", "--cluster", "3", "--data", data, "--listen", fmt.Sprintf("127.0.0.1:%d", p), "--log-level", "warn",
		"--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-ca", f.CA)
	urls := []string{fmt.Sprintf("tls://127.0.0.1:%d", p), fmt.Sprintf("tls://127.0.0.1:%d", p+1), fmt.Sprintf("tls://127.0.0.1:%d", p+2)}
	if ready := srv.waitLine(t, "ready "); ready != "ready "+strings.Join(urls, ",") {
		t.Fatalf("ready line = %q", ready)
	}
	clientTLS := []string{"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}
	out, errOut, code := run(t, `{"role":"user","content":"hello tls cluster"}`, sb, append(append([]string{"import", "--server", urls[1], "--creds", filepath.Join(data, "operator.creds")}, clientTLS...), "agent:main:main")...)
	if code != 0 || !strings.Contains(out, `"imported": 1`) {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", sb, append(append([]string{"call", "--server", urls[2], "--creds", filepath.Join(data, "operator.creds")}, clientTLS...), "sessions_history", `{"sessionKey":"main"}`)...)
	if code != 0 || !strings.Contains(out, "hello tls cluster") {
		t.Fatalf("history: %d %s %s", code, out, errOut)
	}
}
