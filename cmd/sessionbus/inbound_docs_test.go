package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/streams/deadletters"
)

// inboundNATSCommands are docs/inbound.md's nats commands, as written in
// its code blocks (a console block's "$ " dropped).
func inboundNATSCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/inbound.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in
		case in:
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasPrefix(line, "nats ") {
				cmds = append(cmds, line)
			}
		}
	}
	return cmds
}

// shellWords splits a command line as sh would for the quoting the docs
// use: single quotes keep everything, double quotes keep spaces.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	have, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, have = r, true
		case r == ' ':
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// TestInboundDocsCommands runs every nats command of docs/inbound.md as
// written (its $(sessionbus home --role ROLE) and $TOK filled in as the
// shell would) against a real server, worker and gateway: each runs with
// the credentials it names and shows what the page says it shows.
func TestInboundDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	e := startOpsEnv(t)
	ctx := bustest.Context(t)
	// a dead letter for the page's dead-letter reads
	if _, err := deadletters.Open(ctx, e.js, bus.NewNames(""), 1); err != nil {
		t.Fatal(err)
	}
	delivery, _ := json.Marshal(map[string]any{"channel": "web", "to": "u1", "message": "lost"})
	if err := deadletters.Publish(ctx, e.js, bus.NewNames(""), deadletters.Record{DeliveryID: "d-docs", Channel: "web", SessionKey: "agent:main:main",
		URL: "http://127.0.0.1:9/nowhere", Attempts: 2, LastError: "connection refused", FailedAt: time.Now().UnixMilli(), Delivery: delivery}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.op.Mint(bus.Caller{Adapter: bus.AnyChannel}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ prefix, out string }{
		{`req sb.inbound '{"channel":"telegram"`, `"status":"accepted"`},
		{`req sb.inbound '{"channel":"googlechat"`, `"sessionKey":"agent:main:googlechat:group:spaces/aaaa:thread:spaces/aaaa/threads/x"`},
		{"stream get SB_DELIVER --last-for sb.deliver.telegram", `"channel":"telegram"`},
		{`req sb.inbound '{"sessionKey":"agent:main:main"`, `"status":"accepted"`},
		{`req sb.inbound '{"sessionKey":"agent:main:main"`, `"repeat":true`},
		{"sub 'sb.deadletter.>' --stream SB_DEADLETTER --all", `"deliveryId":"d-docs"`},
		{"stream get SB_DEADLETTER --last-for sb.deadletter.web", "d-docs"},
	}
	cmds := inboundNATSCommands(t)
	if len(cmds) != len(want) {
		t.Fatalf("docs/inbound.md has %d nats commands, the test checks %d: %q", len(cmds), len(want), cmds)
	}
	for i, c := range cmds {
		if !strings.Contains(c, want[i].prefix) {
			t.Fatalf("command %d of docs/inbound.md is %q, the test expects one with %q", i, c, want[i].prefix)
		}
		line := strings.NewReplacer(`"$(sessionbus home --role admin)"`, e.adminNATS, `"$(sessionbus home --role ops)"`, e.opsCreds, "$TOK", tok).Replace(c)
		args := shellWords(t, line)
		// a reply is delivered once its turn ends: the read waits for it
		var out string
		bustest.WaitFor(t, time.Minute, c, func() bool {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(rctx, "go", append([]string{"tool", "nats", "-s", e.url}, args[1:]...)...)
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
			b, err := cmd.CombinedOutput()
			out = string(b)
			if err != nil && !strings.HasPrefix(want[i].prefix, "stream get SB_DELIVER") {
				t.Fatalf("%s: %v\n%s", c, err, b)
			}
			return err == nil && strings.Contains(out, want[i].out)
		})
	}
}
