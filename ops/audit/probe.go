package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// ProbeTimeout bounds each step of a probe (dial, greeting, connect), so
// an audit of a server that does not answer ends instead of hanging.
const ProbeTimeout = 5 * time.Second

// Probe is what connecting to the server showed.
type Probe struct {
	// Server is the URL (or comma-separated URLs) the audit was given.
	Server string
	// Err is why no server answered; nil when one did, and then URL is
	// the one that answered (without any user:password in it).
	Err error
	URL string
	// ListenHost is the host the server says it listens on (the host of
	// its INFO greeting; 0.0.0.0 is every interface), "" when it says none.
	ListenHost string
	// TLSRequired is true when the server refuses a connection without TLS.
	TLSRequired bool
	// Anonymous is true when the server accepted a connection that gave
	// no credentials at all.
	Anonymous bool
	// CredsRole is the role of the NATS user in the caller's credentials
	// file ("" when it holds none); CredsURL is the server that accepted
	// it ("" when none did).
	CredsRole string
	CredsURL  string
}

// serverInfo is the part of a NATS server's INFO greeting the audit reads.
type serverInfo struct {
	Host        string `json:"host"`
	TLSRequired bool   `json:"tls_required"`
}

// Dial probes server: it reads the first server's greeting that answers,
// connects to it without credentials, then connects with the NATS user in
// credsPath (if the file holds one). opts are added to every connection.
func Dial(server, credsPath string, opts ...nats.Option) *Probe {
	p := &Probe{Server: server}
	var errs []string
	for _, u := range strings.Split(server, ",") {
		addr, err := hostPort(u)
		if err == nil {
			var info serverInfo
			if info, err = readInfo(addr); err == nil {
				p.URL, p.ListenHost, p.TLSRequired = "nats://"+addr, info.Host, info.TLSRequired
				break
			}
		}
		errs = append(errs, err.Error())
	}
	if p.URL == "" {
		p.Err = fmt.Errorf("%s", strings.Join(errs, "; "))
		return p
	}
	base := append([]nats.Option{nats.Name("sessionbus audit"), nats.Timeout(ProbeTimeout), nats.NoReconnect()}, opts...)
	if nc, err := nats.Connect(p.URL, base...); err == nil {
		p.Anonymous = true
		nc.Close()
	}
	credsOpts, err := auth.ConnectOptions(credsPath)
	if err != nil || credsOpts == nil {
		return p
	}
	p.CredsRole = credsRole(credsPath)
	if nc, err := nats.Connect(server, append(base, credsOpts...)...); err == nil {
		p.CredsURL = nc.ConnectedUrlRedacted()
		nc.Close()
	}
	return p
}

// hostPort is the host:port of a server URL as nats.go reads it: the
// scheme may be left out, and the port defaults to 4222.
func hostPort(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("server URL %q is not host:port or nats://host:port", raw)
	}
	port := u.Port()
	if port == "" {
		port = "4222"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// readInfo reads the INFO line a NATS server greets every client with,
// before any credentials are sent: it says where the server listens and
// whether it requires TLS.
func readInfo(addr string) (serverInfo, error) {
	conn, err := net.DialTimeout("tcp", addr, ProbeTimeout)
	if err != nil {
		return serverInfo{}, fmt.Errorf("%s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(ProbeTimeout))
	line, err := bufio.NewReader(io.LimitReader(conn, 1<<20)).ReadString('\n')
	if err != nil {
		return serverInfo{}, fmt.Errorf("%s sent no NATS greeting: %v", addr, err)
	}
	rest, ok := strings.CutPrefix(line, "INFO ")
	var info serverInfo
	if !ok || json.Unmarshal([]byte(rest), &info) != nil {
		return serverInfo{}, fmt.Errorf("%s is not a NATS server (its greeting is not INFO)", addr)
	}
	return info, nil
}

// credsRole is the role a credentials file's NATS user was minted for
// (its role: tag), "" when it has none.
func credsRole(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return ""
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return ""
	}
	for _, t := range uc.Tags {
		if r, ok := strings.CutPrefix(t, "role:"); ok {
			return r
		}
	}
	return ""
}

// isLoopback reports whether host only reaches this machine: a loopback
// address, localhost, or a name that resolves to loopback addresses only.
// An unspecified address (0.0.0.0, ::) is every interface, so not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// urlHost is the host of a URL ("" when it has none).
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
