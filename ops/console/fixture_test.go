package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/ops/metrics"
)

// fixture is a whole deployment (server with auth, worker, gateway) and a
// console on it. Agent "main" is a script that answers "ping X" with
// "pong: ping X"; agent "slow" is an exec agent whose turn for a task
// holding "wait:NAME" ends only once the test creates the file NAME in
// dir, so a test decides when a child finishes.
type fixture struct {
	t     *testing.T
	stack *handlerstest.Stack
	c     *console.Server
	dir   string
	// metricsAddr is the /metrics of the worker and gateway
	metricsAddr string
}

const mainKey = "agent:main:main"

// fixtureModel is agent main's configured model, which the console shows
// for its sessions.
const fixtureModel = "anthropic/claude-fixture"

func newFixture(t *testing.T) *fixture { t.Helper(); return newFixtureWith(t, nil) }

// newFixtureWith lets edit change the console's options (its connection,
// say) before it starts. The gateway and worker report to one metrics
// listener, which the console charts.
func newFixtureWith(t *testing.T, edit func(*handlerstest.Stack, *console.Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(t.TempDir(), "slow.sh")
	body := "#!/bin/sh\nin=$(cat)\nname=$(printf '%s' \"$in\" | grep -o 'wait:[a-z0-9-]*' | head -n1 | cut -d: -f2)\n" +
		"while [ ! -e \"" + dir + "/$name\" ]; do sleep 0.05; done\nprintf '{\"reply\":\"finished %s\"}' \"$name\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	msrv, err := metrics.Serve("127.0.0.1:0", m, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(msrv.Close)
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{
			{ID: "main", Runtime: "script", Model: fixtureModel, Subagents: &config.Subagents{AllowAgents: []string{"slow"}, MaxSpawnDepth: 3},
				Script: map[string]any{"rules": []any{map[string]any{"match": "^ping", "reply": "pong: {{message}}"}}}},
			// slow children may spawn slow children: the board's tree
			{ID: "slow", Runtime: "exec", Model: "openai/slow-fixture", Subagents: &config.Subagents{AllowAgents: []string{"slow"}, MaxSpawnDepth: 3}, Exec: map[string]any{"command": []any{script}, "timeoutSeconds": 300}},
		}
	}, handlers.WithToolObserver(m))
	gatewaytest.Start(t, s, s.Conn, "gw-test", nil, gateway.Options{Observer: m})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := console.Options{
		Conn: s.Conn, Operator: s.Operator, Names: bus.NewNames(s.Config.Bus.Prefix), Listen: "127.0.0.1:0",
		Auth: true, Account: s.Server.Deployment().AccountKey(auth.DefaultAccount), MetricsFrom: []string{msrv.Addr()},
		AgentModel: s.Config.AgentModel,
	}
	if edit != nil {
		edit(s, &o)
	}
	c, err := console.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fixture{t: t, stack: s, c: c, dir: dir, metricsAddr: msrv.Addr()}
	// the main session exists before anything is spawned from it
	s.Put(&sessions.Entry{Key: mainKey, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	f.ensureMain()
	return f
}

// ensureMain creates the main session with one human turn.
func (f *fixture) ensureMain() {
	f.t.Helper()
	f.chatAs(mainKey, "ping hello")
}

// chatAs sends one human turn on the terminal channel and waits for it.
func (f *fixture) chatAs(key, text string) {
	f.t.Helper()
	tok, err := f.stack.Operator.Mint(bus.Caller{Adapter: "terminal"}, time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"sessionKey": key, "channel": "terminal", "from": "tester", "text": text, "timeoutSeconds": 60})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := bus.Inbound(ctx, f.stack.Conn, bus.NewNames(f.stack.Config.Bus.Prefix), tok, body); err != nil {
		f.t.Fatal(err)
	}
}

// spawn starts a child of main that runs until finish(name).
func (f *fixture) spawn(label, name string) string {
	f.t.Helper()
	res := f.stack.MustCall(mainKey, "sessions_spawn", fmt.Sprintf(`{"task":"wait:%s","label":%q,"agentId":"slow"}`, name, label))
	key, _ := res["childSessionKey"].(string)
	if key == "" {
		f.t.Fatalf("spawn: %v", res)
	}
	return key
}

// spawnUnder starts a child of parent (a slow child itself) that runs
// until finish(name).
func (f *fixture) spawnUnder(parent, label, name string) string {
	f.t.Helper()
	res := f.stack.MustCall(parent, "sessions_spawn", fmt.Sprintf(`{"task":"wait:%s","label":%q,"agentId":"slow"}`, name, label))
	key, _ := res["childSessionKey"].(string)
	if key == "" {
		f.t.Fatalf("spawn under %s: %v", parent, res)
	}
	return key
}

// finish lets the child waiting on name end its turn.
func (f *fixture) finish(name string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// credsText is a fresh credentials file of role, as `sessionbus creds` prints it.
func (f *fixture) credsText(role auth.Role) string {
	f.t.Helper()
	b, err := os.ReadFile(bustest.RoleCreds(f.t, f.stack.Server.Deployment(), role))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// client is an HTTP client with its own cookies, logged in with creds
// (none: not logged in).
func (f *fixture) client(creds string) *http.Client {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	if creds != "" {
		code, body := f.do(hc, "POST", "/api/login", map[string]any{"creds": creds}, false)
		if code != 200 {
			f.t.Fatalf("login: %d %s", code, body)
		}
	}
	return hc
}

// do sends one request (with the action header when action) and returns
// the status and body.
func (f *fixture) do(hc *http.Client, method, path string, body any, action bool) (int, string) {
	f.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(f.c.URL(), "/")+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if action {
		req.Header.Set("X-Sessionbus-Console", "1")
	}
	res, err := hc.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
