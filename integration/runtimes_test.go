package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// execAgentEnv makes the test binary act as an exec agent (see
// execAgentMain): the gateway runs it once per turn.
const execAgentEnv = "SB_TEST_EXEC_AGENT"

// execAgentTokenOut names a file the exec agent writes its run token to.
const execAgentTokenOut = "SB_TEST_EXEC_TOKEN_OUT"

// execAgentMain is an exec agent that calls sessions_list over NATS with
// the run token from its stdin and replies with the keys it saw.
func execAgentMain() int {
	var in struct {
		SessionKey   string `json:"sessionKey"`
		Message      string `json:"message"`
		NATSURL      string `json:"natsUrl"`
		Token        string `json:"token"`
		ToolsSubject string `json:"toolsSubject"`
	}
	reply := func(v map[string]any) int {
		_ = json.NewEncoder(os.Stdout).Encode(v)
		return 0
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		return reply(map[string]any{"error": "bad stdin: " + err.Error()})
	}
	if strings.HasPrefix(in.Message, "Agent-to-agent announce step") {
		return reply(map[string]any{"reply": "ANNOUNCE_SKIP"})
	}
	if out := os.Getenv(execAgentTokenOut); out != "" {
		// the token a compromised runtime would keep, for the replay test
		_ = os.WriteFile(out, []byte(in.Token), 0o600)
	}
	var opts []nats.Option
	if creds := os.Getenv("SESSIONBUS_CREDS"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
		if inbox, err := auth.InboxOf(creds); err == nil {
			opts = append(opts, nats.CustomInboxPrefix(inbox))
		}
	}
	nc, err := nats.Connect(in.NATSURL, opts...)
	if err != nil {
		return reply(map[string]any{"error": "connect: " + err.Error()})
	}
	defer nc.Close()
	m := nats.NewMsg(in.ToolsSubject + ".sessions_list")
	m.Header.Set(bus.HeaderToken, in.Token)
	m.Data = []byte(`{"limit":10}`)
	res, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		return reply(map[string]any{"error": "sessions_list: " + err.Error()})
	}
	return reply(map[string]any{"reply": fmt.Sprintf("%s saw %s", in.SessionKey, listedKeys(res.Data))})
}

// listedKeys is the session keys of a sessions_list result, sorted as
// returned, or the raw result when it is not one.
func listedKeys(data []byte) string {
	var out struct {
		Sessions []struct {
			Key string `json:"key"`
		} `json:"sessions"`
	}
	if json.Unmarshal(data, &out) != nil || out.Sessions == nil {
		return "no list: " + string(data)
	}
	keys := make([]string, len(out.Sessions))
	for i, s := range out.Sessions {
		keys[i] = s.Key
	}
	return strings.Join(keys, ",")
}

// chatStub is an OpenAI-compatible chat-completions endpoint: it asks for
// sessions_list, then answers with what the tool returned; the announce
// step gets ANNOUNCE_SKIP.
func chatStub(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(raw, &body); err != nil || len(body.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		last := body.Messages[len(body.Messages)-1]
		msg := map[string]any{"role": "assistant"}
		switch {
		case last.Role == "tool":
			msg["content"] = "tool said " + listedKeys([]byte(last.Content))
		case strings.Contains(last.Content, "Agent-to-agent announce step"):
			msg["content"] = "ANNOUNCE_SKIP"
		default:
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{
				"id": "call_1", "type": "function",
				"function": map[string]any{"name": "sessions_list", "arguments": `{"limit":10}`},
			}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRuntimesCallToolsThroughTheBus: a sessions_send to an exec agent and
// to an openai agent, each of which calls sessions_list during its turn,
// over NATS, authenticated as its own session (the list is that session's
// view: its own key among them).
func TestRuntimesCallToolsThroughTheBus(t *testing.T) {
	stub := chatStub(t)
	t.Setenv("SB_TEST_OPENAI_KEY", "sk-test-runtimes")
	s, _ := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Tools.AgentToAgent.Allow = []string{"*"}
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "ex", Runtime: "exec", Exec: map[string]any{
				"command": []string{os.Args[0]},
				"env":     map[string]any{execAgentEnv: "1"},
			}},
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{
				"baseURL": stub.URL + "/v1", "model": "stub", "apiKeyEnv": "SB_TEST_OPENAI_KEY",
			}},
		}
	})
	now := time.Now().UnixMilli()
	for _, key := range []string{"agent:ex:main", "agent:oa:main"} {
		s.Put(&sessions.Entry{Key: key, AgentID: strings.Split(key, ":")[1], SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	}
	for _, tc := range []struct{ target, prefix string }{
		{"agent:ex:main", "agent:ex:main saw "},
		{"agent:oa:main", "tool said "},
	} {
		res := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+tc.target+`","message":"who is there?","timeoutSeconds":60}`)
		reply, _ := res["reply"].(string)
		if res["status"] != "ok" || !strings.HasPrefix(reply, tc.prefix) {
			t.Fatalf("send to %s: %v", tc.target, res)
		}
		if keys := strings.Split(strings.TrimPrefix(reply, tc.prefix), ","); !slices.Contains(keys, tc.target) {
			t.Fatalf("%s listed %q: not its own session's view", tc.target, keys)
		}
	}
}
