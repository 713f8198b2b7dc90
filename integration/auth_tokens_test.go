package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// A run's token works while the run runs and is refused (401) once it
// ended: the exec runtime keeps the token it was given, and replaying it
// after the turn fails, through a real connection to the worker.
func TestRunTokenRevokedWhenTheRunEnds(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	s, _ := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Tools.AgentToAgent.Allow = []string{"*"}
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "ex", Runtime: "exec", Exec: map[string]any{
				"command": []string{os.Args[0]},
				"env":     map[string]any{execAgentEnv: "1", execAgentTokenOut: tokenFile},
				// a confined agent writes only where it is let
				"writePaths": []string{filepath.Dir(tokenFile)},
			}},
		}
	})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: "agent:ex:main", AgentID: "ex", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	res := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"agent:ex:main","message":"who is there?","timeoutSeconds":60}`)
	if res["status"] != "ok" || !strings.HasPrefix(res["reply"].(string), "agent:ex:main saw ") {
		t.Fatalf("the run's own tool call with its token: %v", res)
	}
	runID := res["runId"].(string)
	tok, err := os.ReadFile(tokenFile)
	if err != nil || len(tok) == 0 {
		t.Fatalf("the exec agent kept no token: %v", err)
	}
	bustest.WaitFor(t, 10*time.Second, "the worker sees the run's revocation", func() bool {
		_, ok := s.Worker.Deps.Revocations.RevokedAt(runID)
		return ok
	})
	_, err = bus.Call(bustest.Context(t), s.Conn, s.Worker.Deps.Names, string(tok), "sessions_list", nil)
	if !bustest.IsCode(err, bus.CodeUnauthorized) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("replayed token of an ended run: %v", err)
	}
}

// The worker refuses a revoked run's token (also one it verified and
// cached before), a token valid only from the future, and one whose
// lifetime is above the maximum; a token minted for the same run after
// the revocation (a retry) passes.
func TestTokenLifetimeThroughTheWorker(t *testing.T) {
	s, _ := sendStack(t, nil)
	names := s.Worker.Deps.Names
	call := func(tok string) error {
		_, err := bus.Call(bustest.Context(t), s.Conn, names, tok, "sessions_list", nil)
		return err
	}
	old := s.Token(bus.Caller{SessionKey: mainKey, RunID: "run-1"})
	if err := call(old); err != nil {
		t.Fatal(err)
	}
	if err := s.Worker.Deps.Revocations.Revoke(bustest.Context(t), "run-1", revocations.ReasonKilled); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "revocation watched", func() bool {
		_, ok := s.Worker.Deps.Revocations.RevokedAt("run-1")
		return ok
	})
	if err := call(old); !bustest.IsCode(err, bus.CodeUnauthorized) {
		t.Fatalf("revoked run's token: %v", err)
	}
	at, _ := s.Worker.Deps.Revocations.RevokedAt("run-1")
	for !time.Now().Truncate(time.Microsecond).After(at) { // a retry mints strictly later
	}
	if err := call(s.Token(bus.Caller{SessionKey: mainKey, RunID: "run-1"})); err != nil {
		t.Fatalf("a retry's token: %v", err)
	}

	seed, err := s.Operator.Seed()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(nbf time.Time, life time.Duration) string {
		gc := jwt.NewGenericClaims(mainKey)
		gc.NotBefore = nbf.Unix()
		gc.Expires = time.Now().Add(life).Unix()
		gc.Data = map[string]any{"sessionKey": mainKey}
		tok, err := gc.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if err := call(sign(time.Now().Add(time.Hour), 2*time.Hour)); !bustest.IsCode(err, bus.CodeUnauthorized) || !strings.Contains(err.Error(), "not valid before") {
		t.Fatalf("future not-before: %v", err)
	}
	if err := call(sign(time.Time{}, bus.MaxTokenTTL+time.Hour)); !bustest.IsCode(err, bus.CodeUnauthorized) {
		t.Fatalf("lifetime above the maximum: %v", err)
	}
}

// sessionbus token refuses a --ttl above the maximum with a usage error.
func TestTokenTTLMaximum(t *testing.T) {
	sb := binary(t, "sessionbus")
	op := bustest.Operator(t)
	creds := filepath.Join(t.TempDir(), "operator.creds")
	if err := op.WriteCreds(creds); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "", sb, "token", "--creds", creds, "--as", mainKey, "--ttl", "25h")
	if code != 2 || !strings.Contains(errOut, "maximum") {
		t.Fatalf("token --ttl 25h: %d %q", code, errOut)
	}
	out, _, code := run(t, "", sb, "token", "--creds", creds, "--as", mainKey, "--ttl", "24h")
	if code != 0 || !strings.HasPrefix(out, "ey") {
		t.Fatalf("token --ttl 24h: %d %q", code, out)
	}
}
