package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

func msgs(t *testing.T, res map[string]any) []map[string]any {
	t.Helper()
	raw, ok := res["messages"].([]any)
	if !ok {
		t.Fatalf("no messages: %v", res)
	}
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i] = m.(map[string]any)
	}
	return out
}

func TestHistoryThrownErrors(t *testing.T) {
	s := handlerstest.Start(t, nil)
	for _, bad := range []string{"../../etc", strings.Repeat("k", 10*1024), "agent:main:a b"} {
		_, err := s.Call(mainKey, "sessions_history", fmt.Sprintf(`{"sessionKey":%q}`, bad))
		if e, ok := bus.AsError(err); !ok || e.Code != 400 || !strings.Contains(e.Message, "is invalid") {
			t.Errorf("sessionKey %.20q: got %v, want a 400", bad, err)
		}
	}
	for params, want := range map[string]string{
		`{}`:                                          "sessionKey required",
		`{"sessionKey":"  "}`:                         "sessionKey required",
		`{"sessionKey":"main","offset":-1}`:           "offset must be a non-negative integer",
		`{"sessionKey":"main","offset":1.5}`:          "offset must be a non-negative integer",
		`{"sessionKey":"main","limit":0}`:             "limit must be a positive integer",
		`{"sessionKey":"main","includeTools":"yes"}`:  "includeTools must be a boolean: send true or false, not a string",
		`{"sessionKey":"main","includeTools":"true"}`: "includeTools must be a boolean: send true or false, not a string",
		`{"sessionKey":"main","includeTools":1}`:      "includeTools must be a boolean: send true or false",
		`null`:                                        `request body must be a JSON object of tool parameters, not null; send {} to call without parameters, or e.g. {"sessionKey":"agent:main:main"}`,
	} {
		_, err := s.Call(mainKey, "sessions_history", params)
		if e, ok := bus.AsError(err); !ok || e.Code != 400 || e.Message != want {
			t.Errorf("%s: got %v, want 400 %q", params, err, want)
		}
	}
}

func TestHistoryResolutionAndVisibility(t *testing.T) {
	s := handlerstest.Start(t, nil)
	imp := s.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":"hello"}`)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:subagent:c1", SpawnedBy: mainKey}, `{"role":"user","content":"child task"}`)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:other"}, `{"role":"user","content":"not yours"}`)

	for _, ref := range []string{mainKey, "main", "current", imp.SessionID} {
		res := s.MustCall(mainKey, "sessions_history", fmt.Sprintf(`{"sessionKey":%q}`, ref))
		if ms := msgs(t, res); len(ms) != 1 || ms[0]["content"] != "hello" {
			t.Fatalf("%s: %v", ref, res)
		}
	}
	if got := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main"}`)["sessionKey"]; got != "main" {
		t.Fatalf("display key for main = %v", got)
	}
	if res := s.MustCall(mainKey, "sessions_history", `{"session_key":"agent:main:subagent:c1"}`); len(msgs(t, res)) != 1 {
		t.Fatalf("child history: %v", res)
	}
	res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"agent:main:other"}`)
	if res["status"] != "forbidden" || res["error"] != "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree)." {
		t.Fatalf("tree guard: %v", res)
	}
	res = s.MustCall(mainKey, "sessions_history", `{"sessionKey":"agent:ops:main"}`)
	if res["status"] != "forbidden" || !strings.HasPrefix(res["error"].(string), "Session history visibility is restricted. Set tools.sessions.visibility=all") {
		t.Fatalf("cross-agent guard: %v", res)
	}
	res = s.MustCall(mainKey, "sessions_history", `{"sessionKey":"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"}`)
	if res["status"] != "error" || res["error"] != "Session not found: aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee (use the full sessionKey from sessions_list)" {
		t.Fatalf("unknown id: %v", res)
	}
	sb := bus.Caller{SessionKey: mainKey, Sandboxed: true}
	res, err := s.CallAs(sb, "sessions_history", `{"sessionKey":"agent:main:other"}`)
	if err != nil || res["status"] != "forbidden" || res["error"] != "Session not visible from this sandboxed agent session: agent:main:other" {
		t.Fatalf("sandbox: %v %v", res, err)
	}
	if res, err := s.CallAs(sb, "sessions_history", `{"sessionKey":"agent:main:subagent:c1"}`); err != nil || len(msgs(t, res)) != 1 {
		t.Fatalf("sandbox child: %v %v", res, err)
	}
}

func TestHistorySanitizesAndRedacts(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"my key is OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"}`,
		`{"role":"assistant","content":[{"type":"text","text":"<thinking>hidden</thinking>Done.<tool_call>{\"name\":\"x\"}</tool_call>"}],"usage":{"input":3}}`,
		`{"role":"toolResult","content":"tool output"}`,
	)
	res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main"}`)
	ms := msgs(t, res)
	if len(ms) != 2 {
		t.Fatalf("tool message not dropped: %v", ms)
	}
	user := ms[0]["content"].(string)
	if strings.Contains(user, "sk-abcdefghijklmnopqrstuvwx") || !strings.Contains(user, "OPENAI_API_KEY=sk-abc…uvwx") {
		t.Fatalf("redaction: %q", user)
	}
	text := ms[1]["content"].([]any)[0].(map[string]any)["text"]
	if text != "Done." {
		t.Fatalf("assistant text = %q", text)
	}
	if _, ok := ms[1]["usage"]; ok {
		t.Fatal("usage not removed")
	}
	if res["contentRedacted"] != true || res["contentTruncated"] != true || res["truncated"] != true || res["droppedMessages"] != false {
		t.Fatalf("flags: %v", res)
	}
	b, _ := json.Marshal(res["messages"])
	if int(res["bytes"].(float64)) != len(b) {
		t.Fatalf("bytes = %v, compact JSON is %d", res["bytes"], len(b))
	}
	if res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","includeTools":true}`); len(msgs(t, res)) != 3 {
		t.Fatal("includeTools did not keep the tool message")
	}
	if _, ok := res["offset"]; ok {
		t.Fatal("pagination fields without offset")
	}
}

// TestHistoryUserPatternMaskedOnce: sessions_history redacts as OpenClaw's
// tool-payload variant does: a logging.redactPatterns entry masks first,
// and the defaults (their ENV-style pattern case-sensitive) do not mask
// its first6…last4 a second time, as a case-insensitive pass would
// (token=***).
func TestHistoryUserPatternMaskedOnce(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Logging.RedactPatterns = []string{`/token=(\S+)/i`} })
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"deploy with token=abcdefghijklmnopqrstuvwxyz now"}`,
		`{"role":"user","content":"and OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx too"}`,
	)
	ms := msgs(t, s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main"}`))
	if len(ms) != 2 || ms[0]["content"] != "deploy with token=abcdef…wxyz now" || ms[1]["content"] != "and OPENAI_API_KEY=sk-abc…uvwx too" {
		t.Fatalf("redacted history: %v", ms)
	}
}

func TestHistoryTruncationAndCaps(t *testing.T) {
	s := handlerstest.Start(t, nil)
	long := strings.Repeat("a", 4001)
	s.Import(importer.ImportOptions{SessionKey: mainKey}, fmt.Sprintf(`{"role":"user","content":%q}`, long))
	res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main"}`)
	c := msgs(t, res)[0]["content"].(string)
	if c != strings.Repeat("a", 4000)+"\n…(truncated)…" || res["contentTruncated"] != true {
		t.Fatalf("4000-char truncation: len %d", len(c))
	}

	s2 := handlerstest.Start(t, nil)
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, strings.Repeat("b", 3000)))
	}
	s2.Import(importer.ImportOptions{SessionKey: mainKey}, lines...)
	res = s2.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","limit":40}`)
	ms := msgs(t, res)
	if res["droppedMessages"] != true || res["truncated"] != true || len(ms) >= 40 || int(res["bytes"].(float64)) > 81920 {
		t.Fatalf("80 KiB cap: %d msgs, bytes %v", len(ms), res["bytes"])
	}
	if !strings.HasPrefix(ms[len(ms)-1]["content"].(string), "39 ") {
		t.Fatal("the cap must drop the oldest rows, not the newest")
	}

	s3 := handlerstest.Start(t, nil)
	var blocks []string
	for i := 0; i < 25; i++ {
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat("c", 4000)))
	}
	s3.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":[`+strings.Join(blocks, ",")+`]}`)
	res = s3.MustCall(mainKey, "sessions_history", `{"sessionKey":"main"}`)
	ms = msgs(t, res)
	if len(ms) != 1 || ms[0]["content"] != "[sessions_history omitted: message too large]" || ms[0]["role"] != "assistant" || res["droppedMessages"] != true {
		t.Fatalf("hard cap placeholder: %v", ms)
	}
}

func TestHistoryPagination(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"one"}`, `{"role":"assistant","content":"two"}`, `{"role":"user","content":"three"}`)
	res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","offset":0,"limit":2}`)
	ms := msgs(t, res)
	if len(ms) != 2 || ms[0]["content"] != "two" || res["nextOffset"].(float64) != 2 || res["hasMore"] != true || res["totalMessages"].(float64) != 3 || res["offset"].(float64) != 0 {
		t.Fatalf("page 1: %v", res)
	}
	if seq := ms[0]["__openclaw"].(map[string]any)["seq"].(float64); seq != 2 {
		t.Fatalf("seq = %v", seq)
	}
	res = s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","offset":2,"limit":2}`)
	if ms := msgs(t, res); len(ms) != 1 || ms[0]["content"] != "one" || res["hasMore"] != false {
		t.Fatalf("page 2: %v", res)
	}
	if _, ok := res["nextOffset"]; ok {
		t.Fatal("nextOffset without hasMore")
	}
	res = s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","offset":9}`)
	if len(msgs(t, res)) != 0 || res["hasMore"] != false {
		t.Fatalf("past the end: %v", res)
	}
	// no limit: the newest tail
	if res := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","limit":1}`); msgs(t, res)[0]["content"] != "three" {
		t.Fatalf("tail: %v", res)
	}
	// integers may come as strings holding a number, as OpenClaw's integer
	// readers take them
	res = s.MustCall(mainKey, "sessions_history", `{"sessionKey":"main","offset":"1","limit":" 1 "}`)
	if ms := msgs(t, res); len(ms) != 1 || ms[0]["content"] != "two" || res["offset"].(float64) != 1 {
		t.Fatalf("numeric strings: %v", res)
	}
}

// TestHistoryRepliesSameWarmAndCold: over the wire, the reply to a repeated
// call (served from the worker's view cache) is byte for byte the first one,
// and so is the reply after the cache is emptied.
func TestHistoryRepliesSameWarmAndCold(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"my key is OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx <b>&</b>"}`,
		`{"role":"assistant","content":[{"type":"text","text":"<thinking>hidden</thinking>Done."}],"usage":{"input":3}}`,
		`{"role":"toolResult","content":"tool output"}`,
		`{"role":"assistant","phase":"commentary","content":"aside"}`,
		fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("a", 4001)),
		`{"role":"assistant","content":"NO_REPLY"}`,
		`{"role":"user","content":"last","n":1.50}`,
	)
	d := s.Worker.Deps
	ctx := bustest.Context(t)
	token := s.Token(bus.Caller{SessionKey: mainKey})
	for _, params := range []string{
		`{"sessionKey":"main"}`,
		`{"sessionKey":"main","includeTools":true}`,
		`{"sessionKey":"main","limit":2}`,
		`{"sessionKey":"main","offset":0,"limit":3}`,
		`{"sessionKey":"main","offset":2,"limit":3,"includeTools":true}`,
		`{"sessionKey":"main","offset":6}`,
	} {
		var replies [][]byte
		for _, reset := range []bool{false, false, true} {
			if reset {
				d.ResetHistoryCache()
			}
			b, err := bus.Call(ctx, s.Conn, d.Names, token, "sessions_history", []byte(params))
			if err != nil {
				t.Fatalf("%s: %v", params, err)
			}
			replies = append(replies, b)
		}
		if !bytes.Equal(replies[0], replies[1]) || !bytes.Equal(replies[0], replies[2]) {
			t.Fatalf("%s: cold, warm and reset replies differ:\n%s\n%s\n%s", params, replies[0], replies[1], replies[2])
		}
	}
	if st := d.HistoryCacheStats(); st.Hits == 0 || st.Entries == 0 || st.Bytes > st.MaxBytes {
		t.Fatalf("cache stats %+v", st)
	}
}
