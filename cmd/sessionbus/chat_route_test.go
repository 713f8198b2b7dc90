package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// TestChatRoute: `chat --route` names no session; the worker routes the
// message as OpenClaw does, creating the session on the first message, and
// the reply is printed as for `chat KEY`. Mixed-up flags are usage errors.
func TestChatRoute(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	cfg, err := config.Parse([]byte(`
session: {dmScope: per-channel-peer}
agents:
  list:
    - id: main
      runtime: script
      script: {rules: [{match: "^say (.*)", reply: "{{1}}"}]}
    - id: ops
      runtime: script
      script: {rules: [{match: "^say (.*)", reply: "ops: {{1}}"}]}
`), "yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bustest.Context(t)
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	gw, err := gateway.Start(ctx, nc, cfg, op, "gw-chat-route", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		args = append([]string{args[0], "--server", s.URL(), "--creds", creds}, args[1:]...)
		code := run(args, strings.NewReader(""), &out, &errb)
		return out.String(), errb.String(), code
	}
	tests := []struct {
		args           []string
		stdout, stderr string
		code           int
	}{
		{[]string{"chat", "--route", "--channel", "telegram", "--from", "4242", "say hello"}, "hello\n", "routed to agent:main:telegram:direct:4242 (new session)\n", 0},
		{[]string{"chat", "--route", "--channel", "telegram", "--from", "4242", "say again"}, "again\n", "routed to agent:main:telegram:direct:4242\n", 0},
		{[]string{"chat", "--route", "--channel", "googlechat", "--from", "users/7", "--group", "spaces/AAAA", "--thread", "spaces/AAAA/threads/x", "say space"}, "space\n",
			"routed to agent:main:googlechat:group:spaces/aaaa:thread:spaces/aaaa/threads/x (new session)\n", 0},
		{[]string{"chat", "--route", "--channel", "slack", "--from", "U1", "--agent", "ops", "say hi"}, "ops: hi\n", "routed to agent:ops:slack:direct:u1 (new session)\n", 0},
		{[]string{"chat", "--route", "--channel", "whatsapp", "--from", "1", "--thread", "9", "say x"}, "", "has no threads", 1},
		{[]string{"chat", "--route", "--channel", "telegram", "--from", "1", "--chat-type", "room", "say x"}, "", `chatType \"room\" is unknown`, 1},
	}
	for _, tt := range tests {
		out, errOut, code := cli(tt.args...)
		if code != tt.code || out != tt.stdout || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
		}
	}
	for _, args := range [][]string{
		{"chat", "--route", "--channel", "telegram", "agent:main:main", "say x"},
		{"chat", "--group", "g", "agent:main:main", "say x"},
		{"chat", "--route", "--stream", "say x"},
	} {
		if _, _, code := cli(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}
