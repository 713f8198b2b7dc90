package gateway

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// fakeRunCreds issues one real agent user's credentials to every run and
// records what was issued and revoked.
type fakeRunCreds struct {
	creds   []byte
	mu      sync.Mutex
	issued  []string
	ttls    []time.Duration
	revoked []string
}

func (f *fakeRunCreds) Issue(runID string, ttl time.Duration) ([]byte, string, func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issued = append(f.issued, runID)
	f.ttls = append(f.ttls, ttl)
	return f.creds, "_INBOX.RUN", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.revoked = append(f.revoked, runID)
		return nil
	}, nil
}

func (f *fakeRunCreds) state() (issued, revoked []string, ttls []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.issued), slices.Clone(f.revoked), slices.Clone(f.ttls)
}

// withExecAgent adds agent "ex": an exec runtime that copies its
// credentials file to out/<message>.creds, then fails on "fail", hangs on
// "slow" and otherwise replies "ok".
func (e *env) withExecAgent(out string) {
	e.t.Helper()
	script := filepath.Join(out, "agent.sh")
	body := `#!/usr/bin/env bash
in=$(cat)
msg=$(printf '%s' "$in" | sed -n 's/.*"message":"\([a-z]*\)".*/\1/p')
cp "${SESSIONBUS_CREDS:-/nonexistent}" "$OUT/$msg.creds" 2>/dev/null
case "$msg" in
  fail) exit 1 ;;
  slow) sleep 30 ;;
esac
printf '{"reply":"ok"}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.cfg.Agents.List = append(e.cfg.Agents.List, config.Agent{ID: "ex", Runtime: "exec", Exec: map[string]any{
		"command": []any{script}, "timeoutSeconds": 300, "env": map[string]any{"out": out},
		"writePaths": []any{out}, // a confined agent writes only where it is let
	}})
}

func agentCreds(t *testing.T) []byte {
	t.Helper()
	d, err := auth.LoadOrCreate(t.TempDir(), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.Mint(auth.DefaultAccount, auth.RoleAgent, "run", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An exec run gets the NATS user RunCredentials issues, for as long as its
// run may take, and the gateway revokes it before the run is recorded
// ended, whether the turn replied, failed or timed out; a script run gets
// none.
func TestRunUserIssuedAndRevoked(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	e := newEnv(t)
	out := t.TempDir()
	e.withExecAgent(out)
	rc := &fakeRunCreds{creds: agentCreds(t)}
	e.gateway("gw1", Options{RunCredentials: rc})

	for _, tc := range []struct {
		msg, status string
		timeout     int
	}{{"hello", runs.OK, 0}, {"fail", runs.Error, 0}, {"slow", runs.Timeout, 5}} {
		// "slow" copies its credentials, then sleeps past its timeout: 5 s
		// leaves the confined launcher (a re-exec of this test binary,
		// slow under -race on a loaded machine) time to start it
		req := e.request("agent:ex:main", "ex", tc.msg)
		req.TimeoutSeconds = tc.timeout
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != tc.status {
			t.Fatalf("%s: record %+v", tc.msg, rec)
		}
		issued, revoked, ttls := rc.state()
		if issued[len(issued)-1] != req.RunID || !slices.Contains(revoked, req.RunID) {
			t.Fatalf("%s: issued %v, revoked %v: want %s issued and revoked by the time its run ended", tc.msg, issued, revoked, req.RunID)
		}
		if got, _ := os.ReadFile(filepath.Join(out, tc.msg+".creds")); !bytes.Equal(got, rc.creds) {
			t.Fatalf("%s: the process read credentials %q", tc.msg, got)
		}
		if tc.timeout > 0 && ttls[len(ttls)-1] > time.Minute {
			t.Fatalf("a run of %ds got a user for %v", tc.timeout, ttls[len(ttls)-1])
		}
	}
	req := e.request("agent:main:main", "main", "hello")
	e.submit(req)
	e.wait(req.RunID)
	if issued, _, _ := rc.state(); slices.Contains(issued, req.RunID) {
		t.Fatal("a script run was issued a NATS user")
	}
}

// A gateway that stops while an exec turn runs revokes that run's user.
func TestRunUserRevokedOnStop(t *testing.T) {
	e := newEnv(t)
	e.withExecAgent(t.TempDir())
	rc := &fakeRunCreds{creds: agentCreds(t)}
	g := e.gateway("gw1", Options{RunCredentials: rc})
	req := e.request("agent:ex:main", "ex", "slow")
	e.submit(req)
	bustest.WaitFor(t, 20*time.Second, "the slow run's user issued", func() bool {
		issued, _, _ := rc.state()
		return slices.Contains(issued, req.RunID)
	})
	g.Stop()
	if _, revoked, _ := rc.state(); !slices.Contains(revoked, req.RunID) {
		t.Fatalf("revoked %v after the gateway stopped, want %s", revoked, req.RunID)
	}
}

// Without RunCredentials a gateway with exec agents says once that their
// runs get no NATS user, and the runs go on without one.
func TestNoRunUserLoggedOnce(t *testing.T) {
	e := newEnv(t)
	out := t.TempDir()
	e.withExecAgent(out)
	var buf syncBuffer
	nc, _ := bustest.Connect(t, e.srv)
	g, err := StartWithOptions(t.Context(), nc, e.cfg, e.op, "gw1", slog.New(slog.NewTextHandler(&buf, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	for range 2 {
		req := e.request("agent:ex:main", "ex", "hello")
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != runs.OK {
			t.Fatalf("record %+v", rec)
		}
	}
	if n := strings.Count(buf.String(), "exec runs get no NATS user"); n != 1 {
		t.Fatalf("logged %d times: %s", n, buf.String())
	}
	if _, err := os.Stat(filepath.Join(out, "hello.creds")); !os.IsNotExist(err) {
		t.Fatalf("a run got credentials: %v", err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
