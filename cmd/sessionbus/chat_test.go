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

// TestChatSilence: a turn that ends ok without a reply (NO_REPLY, or a
// yield) leaves stdout empty, says so on stderr and exits 0; a reply is
// printed on stdout as it is.
func TestChatSilence(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	cfg, err := config.Parse([]byte(`
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: "^hush"
            reply: "NO_REPLY"
          - match: "^wait"
            tool: {name: sessions_yield, params: {message: "later"}}
          - match: "^say (.*)"
            reply: "{{1}}"
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
	gw, err := gateway.Start(ctx, nc, cfg, op, "gw-chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	cli := func(stdin string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		args = append([]string{args[0], "--server", s.URL(), "--creds", creds}, args[1:]...)
		code := run(args, strings.NewReader(stdin), &out, &errb)
		return out.String(), errb.String(), code
	}
	if _, errOut, code := cli(`{"role":"user","content":"start"}`, "import", "agent:main:main"); code != 0 {
		t.Fatalf("import: %d %s", code, errOut)
	}
	for _, text := range []string{"hush now", "wait for the children"} {
		out, errOut, code := cli("", "chat", "agent:main:main", text)
		if code != 0 || out != "" || strings.TrimSpace(errOut) != chatSilence {
			t.Errorf("chat %q: exit %d, stdout %q, stderr %q; want 0, nothing, %q", text, code, out, errOut, chatSilence)
		}
	}
	if out, errOut, code := cli("", "chat", "agent:main:main", "say v2 ships Friday"); code != 0 || out != "v2 ships Friday\n" || errOut != "" {
		t.Errorf("chat with a reply: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
