package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// plantedSecret is one sample of a default redaction pattern: text holds
// it in the pattern's context, secret is what must never come out raw.
// bare marks secrets the redactor recognises on their own (a vendor
// prefix), which can therefore be planted alone in a key or an agent id.
type plantedSecret struct {
	text, secret string
	bare         bool
}

// plantedSecrets has one sample per default pattern (sanitize,
// defaultPatterns), in its order.
var plantedSecrets = []plantedSecret{
	{"MY_API_KEY=Aa1Bb2Cc3Dd4Ee5Ff6Gg7", "Aa1Bb2Cc3Dd4Ee5Ff6Gg7", false},
	{`{"apiKey":"Jj1Kk2Ll3Mm4Nn5Oo6Pp7"}`, "Jj1Kk2Ll3Mm4Nn5Oo6Pp7", false},
	{"--api-key Qq1Rr2Ss3Tt4Uu5Vv6Ww7", "Qq1Rr2Ss3Tt4Uu5Vv6Ww7", false},
	{"Authorization: Bearer Xx1Yy2Zz3Aa4Bb5Cc6Dd7", "Xx1Yy2Zz3Aa4Bb5Cc6Dd7", false},
	{"use Bearer Ee1Ff2Gg3Hh4Ii5Jj6Kk7Ll8 now", "Ee1Ff2Gg3Hh4Ii5Jj6Kk7Ll8", false},
	{"-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretPemLineNumberOne0\nMIIEsecretPemLineNumberTwo0\n-----END RSA PRIVATE KEY-----", "MIIEsecretPemLine", false},
	{"sk-Mm1Nn2Oo3Pp4Qq5Rr6Ss7", "sk-Mm1Nn2Oo3Pp4Qq5Rr6Ss7", true},
	{"ghp_Tt1Uu2Vv3Ww4Xx5Yy6Zz7Aa8", "ghp_Tt1Uu2Vv3Ww4Xx5Yy6Zz7Aa8", true},
	{"github_pat_Bb1Cc2Dd3Ee4Ff5Gg6Hh7", "github_pat_Bb1Cc2Dd3Ee4Ff5Gg6Hh7", true},
	{"xoxb-1234567890-Ii1Jj2Kk3Ll4", "xoxb-1234567890-Ii1Jj2Kk3Ll4", true},
	{"xapp-1-Mm1Nn2Oo3Pp4Qq5", "xapp-1-Mm1Nn2Oo3Pp4Qq5", true},
	{"gsk_Rr1Ss2Tt3Uu4Vv5Ww6", "gsk_Rr1Ss2Tt3Uu4Vv5Ww6", true},
	{"AIzaXx1Yy2Zz3Aa4Bb5Cc6Dd7", "AIzaXx1Yy2Zz3Aa4Bb5Cc6Dd7", true},
	{"pplx-Ee1Ff2Gg3Hh4Ii5Jj6", "pplx-Ee1Ff2Gg3Hh4Ii5Jj6", true},
	{"npm_Kk1Ll2Mm3Nn4Oo5Pp6", "npm_Kk1Ll2Mm3Nn4Oo5Pp6", true},
	{"https://api.telegram.org/bot123456789:Qq1Rr2Ss3Tt4Uu5Vv6Ww7Xx/sendMessage", "123456789:Qq1Rr2Ss3Tt4Uu5Vv6Ww7Xx", false},
	{"987654321:Yy1Zz2Aa3Bb4Cc5Dd6Ee7Ff", "987654321:Yy1Zz2Aa3Bb4Cc5Dd6Ee7Ff", false},
	{"https://x.example/cb?access_token=Gg1Hh2Ii3Jj4Kk5Ll6Mm7", "Gg1Hh2Ii3Jj4Kk5Ll6Mm7", false},
	{"then password=Nn1Oo2Pp3Qq4Rr5Ss6Tt7 ok", "Nn1Oo2Pp3Qq4Rr5Ss6Tt7", false},
	{"AKIDUu1Vv2Ww3Xx4Yy5Zz6", "AKIDUu1Vv2Ww3Xx4Yy5Zz6", true},
	{"LTAIAa1Bb2Cc3Dd4Ee5Ff6", "LTAIAa1Bb2Cc3Dd4Ee5Ff6", true},
	{"hf_Gg1Hh2Ii3Jj4Kk5Ll6Mm7", "hf_Gg1Hh2Ii3Jj4Kk5Ll6Mm7", true},
	{"r8_Nn1Oo2Pp3Qq4Rr5Ss6Tt7", "r8_Nn1Oo2Pp3Qq4Rr5Ss6Tt7", true},
}

// leakAgentEnv makes the test binary an exec agent that fails its turn
// with every planted secret on stderr (see leakAgentMain).
const leakAgentEnv = "SB_TEST_LEAK_AGENT"

func leakAgentMain() int {
	for _, p := range plantedSecrets {
		fmt.Fprintln(os.Stderr, p.text)
	}
	return 3
}

// Every default pattern's sample, planted in a transcript, a run error, an
// exec runtime's stderr and tool arguments, never comes out raw: not in a
// tool reply (history, list previews, status card, subagents, send), not
// on SB_DELIVER, SB_EVENTS or SB_SIGNALS, not in the runs bucket, not in
// the worker's or gateway's log.
func TestRedactionNeverLeaks(t *testing.T) {
	all := make([]string, len(plantedSecrets))
	for i, p := range plantedSecrets {
		all[i] = p.text
		if out, _ := sanitize.DefaultRedactor().ToolPayload(p.text); strings.Contains(out, p.secret) {
			t.Fatalf("sample %d (%q) is not one the redactor masks: %q", i+1, p.text, out)
		}
	}
	everySecret := strings.Join(all, "\n")

	logs := &syncWriter{w: &strings.Builder{}} // a log sink shared by every logger of the test
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(logger) // the worker logs to the default logger
	t.Cleanup(func() { slog.SetDefault(prev) })

	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Session.AgentToAgent.MaxPingPongTurns = 1
		c.Agents.Defaults.Subagents.AllowAgents = []string{"*"}
		c.Agents.List = []config.Agent{
			scriptAgent("main",
				map[string]any{"match": "(?s)^echo (.*)", "reply": "{{1}}"},
				map[string]any{"match": "(?s)^Agent-to-agent announce step", "reply": "announce: " + everySecret},
				map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "leak", Runtime: "exec", Exec: map[string]any{
				"command": []string{os.Args[0]},
				"env":     map[string]any{leakAgentEnv: "1"},
			}},
		}
	})
	gatewaytest.Start(t, s, s.Conn, "gw-redact", logger, gateway.Options{})

	var replies []string
	call := func(as, tool string, params map[string]any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(params)
		cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer ccancel()
		data, err := bus.Call(cctx, s.Conn, s.Worker.Deps.Names, s.Token(bus.Caller{SessionKey: as, AgentID: strings.Split(as, ":")[1]}), tool, body)
		if err != nil {
			replies = append(replies, tool+" error: "+err.Error())
			return nil
		}
		replies = append(replies, tool+": "+string(data))
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		return out
	}

	// 1. a transcript holding every sample, read back every way
	s.Import(importer.ImportOptions{SessionKey: "agent:main:telegram:group:g1", AgentID: "main", Label: "planted"},
		`{"type":"message","message":{"role":"user","content":`+mustJSON(everySecret)+`}}`,
		`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":`+mustJSON(everySecret)+`}]}}`,
	)
	call(mainKey, "sessions_history", map[string]any{"sessionKey": "agent:main:telegram:group:g1", "includeTools": true})
	call(mainKey, "sessions_list", map[string]any{"messageLimit": 5, "includeLastMessage": true, "includeDerivedTitles": true})
	call("agent:main:telegram:group:g1", "session_status", map[string]any{})

	// 2. tool arguments: a message echoed back by the target and announced
	// to its channel, and secrets alone where a key or an agent id goes
	call(mainKey, "sessions_send", map[string]any{"sessionKey": "agent:main:telegram:group:g1", "message": "echo " + everySecret, "timeoutSeconds": 60})
	for _, p := range plantedSecrets {
		if p.bare {
			call(mainKey, "session_status", map[string]any{"sessionKey": "agent:main:" + p.secret})
			call(mainKey, "sessions_history", map[string]any{"sessionKey": "agent:main:" + p.secret})
			call(mainKey, "sessions_spawn", map[string]any{"task": "x", "agentId": p.secret})
		}
	}

	// 3. a run error quoting the exec runtime's stderr: a send that waits
	// for it and a child whose failure is announced
	call(mainKey, "sessions_send", map[string]any{"sessionKey": "agent:leak:main", "message": "go", "timeoutSeconds": 60})
	spawned := call(mainKey, "sessions_spawn", map[string]any{"task": "leak " + everySecret, "agentId": "leak", "label": "leaky"})
	child, _ := spawned["childSessionKey"].(string)
	if child == "" {
		t.Fatalf("spawn: %v", spawned)
	}
	bustest.WaitFor(t, 60*time.Second, "the child's run ends", func() bool {
		res := call(mainKey, "subagents", map[string]any{"action": "list"})
		b, _ := json.Marshal(res)
		return strings.Contains(string(b), `"status":"failed"`) || strings.Contains(string(b), `"status":"error"`)
	})
	call(mainKey, "subagents", map[string]any{"action": "list"})
	call(mainKey, "session_status", map[string]any{"sessionKey": child})
	call(mainKey, "sessions_list", map[string]any{"messageLimit": 5})

	// the worker's logger is the redacting one (a 500's details, say,
	// are only logged)
	s.Worker.Deps.Log.Error("probe: a tool failed", "err", errors.New(everySecret), "input", everySecret)

	// every output
	outputs := map[string]string{"tool replies": strings.Join(replies, "\n"), "logs": logs.String()}
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	names := s.Worker.Deps.Names
	for _, stream := range []string{names.DeliverStream(), names.EventsStream(), names.SignalsStream()} {
		outputs[stream] = streamText(t, js, stream)
	}
	if !strings.Contains(outputs[names.DeliverStream()], "announce: ") {
		t.Fatalf("nothing was delivered: the announce carrying the samples never reached SB_DELIVER:\n%s", outputs[names.DeliverStream()])
	}
	// the runs bucket stores replies as the agent gave them, like a
	// transcript; what it tells readers about a failure is its error
	var runErrors strings.Builder
	for _, line := range strings.Split(streamText(t, js, "KV_"+names.RunsBucket()), "\n") {
		if i := strings.IndexByte(line, '{'); i >= 0 {
			var rec struct{ Error string }
			if json.Unmarshal([]byte(line[i:]), &rec) == nil && rec.Error != "" {
				runErrors.WriteString(rec.Error + "\n")
			}
		}
	}
	if !strings.Contains(runErrors.String(), "stderr") {
		t.Fatalf("no run error quotes the exec runtime's stderr: %q", runErrors.String())
	}
	outputs["run errors"] = runErrors.String()
	if !strings.Contains(outputs["tool replies"], "***") && !strings.Contains(outputs["tool replies"], "…") {
		t.Fatal("no tool reply shows a mask: the planting did not reach them")
	}
	for _, p := range plantedSecrets {
		for where, text := range outputs {
			if i := strings.Index(text, p.secret); i >= 0 {
				t.Errorf("pattern sample %q leaked raw in %s: …%s…", p.text, where, text[max(0, i-200):min(len(text), i+len(p.secret)+40)])
			}
		}
	}
}

// streamText is every message a stream holds, as text.
func streamText(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		fmt.Fprintf(&b, "%s %s\n", m.Subject, m.Data)
	}
	return b.String()
}
