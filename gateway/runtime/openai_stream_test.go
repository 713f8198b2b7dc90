package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// writeSSE answers with the given data payloads as server-sent events,
// flushed one by one as a streaming endpoint sends them.
func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	f, _ := w.(http.Flusher)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		if f != nil {
			f.Flush()
		}
	}
}

func textChunk(s string) string {
	return string(mustJSON(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}}))
}

const stopChunk = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// recorder collects what a turn emits.
type recorder struct{ events []Event }

func (r *recorder) emit(e Event) { r.events = append(r.events, e) }

func (r *recorder) text() string {
	var b strings.Builder
	for _, e := range r.events {
		if e.Type == EventText {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func TestOpenAIStreamAssemblesToolCallsAndText(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			// one tool call whose name and arguments come in pieces, as
			// OpenAI streams them, with a comment line and an event field
			writeSSE(w,
				`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"sessions_","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"list","arguments":"{\"lim"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"it\":2}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				"[DONE]")
			return
		}
		writeSSE(w, textChunk("Two "), textChunk("sessions"), textChunk(" found."), stopChunk, "[DONE]")
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	tools := &fakeTools{results: map[string]string{"sessions_list": `{"count":2}`}}
	rec := &recorder{}
	res, err := rt.Run(context.Background(), Turn{Message: "list", Emit: rec.emit}, tools)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "Two sessions found." {
		t.Fatalf("reply %q", res.Reply)
	}
	if s.body(0)["stream"] != true {
		t.Fatalf("request did not ask for a stream: %v", s.body(0))
	}
	if len(tools.calls) != 1 || tools.calls[0].Name != "sessions_list" {
		t.Fatalf("tool calls %+v", tools.calls)
	}
	jsonEqual(t, tools.calls[0].Params, `{"limit":2}`)
	// the assistant message echoed to the model carries the assembled call
	msgs := s.body(1)["messages"].([]any)
	echo, _ := json.Marshal(msgs[len(msgs)-2])
	if !strings.Contains(string(echo), `"id":"call_9"`) || !strings.Contains(string(echo), `"name":"sessions_list"`) || !strings.Contains(string(echo), `{\"limit\":2}`) {
		t.Fatalf("echoed assistant message %s", echo)
	}
	var kinds []string
	for _, e := range rec.events {
		kinds = append(kinds, e.Type)
	}
	if got := strings.Join(kinds, ","); got != "tool_call,tool_result,text,text,text" {
		t.Fatalf("events %s", got)
	}
	jsonEqual(t, rec.events[0].Arguments, `{"limit":2}`)
	if rec.events[1].Tool != "sessions_list" || !rec.events[1].OK || rec.text() != res.Reply {
		t.Fatalf("events %+v", rec.events)
	}
}

func TestOpenAINonStreamingBodyStillWorks(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, textResponse("plain answer"))
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	rec := &recorder{}
	res, err := rt.Run(context.Background(), Turn{Message: "hi", Emit: rec.emit}, nil)
	if err != nil || res.Reply != "plain answer" {
		t.Fatalf("%+v %v", res, err)
	}
	if len(rec.events) != 1 || rec.text() != "plain answer" {
		t.Fatalf("events %+v", rec.events)
	}
}

func TestOpenAIBrokenStreamIsARunError(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"truncated", "data: " + textChunk("Hel") + "\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo", "the stream ended before [DONE] (truncated"},
		{"cut between chunks", "data: " + textChunk("Hel") + "\n\n", "the stream ended before [DONE] (truncated"},
		{"malformed chunk", "data: " + textChunk("Hel") + "\n\ndata: {not json}\n\ndata: [DONE]\n\n", "stream chunk is not chat-completions JSON"},
		{"endpoint error", "data: {\"error\":{\"message\":\"overloaded\"}}\n\n", "endpoint error in the stream: overloaded"},
		{"no choices", "data: [DONE]\n\n", "the stream carried no choices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = fmt.Fprint(w, tc.body)
			})
			rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
			res, err := rt.Run(context.Background(), Turn{Message: "hi", Emit: (&recorder{}).emit}, nil)
			var re *RunError
			if res != nil || !errors.As(err, &re) || !strings.Contains(re.Message, tc.want) {
				t.Fatalf("got %+v, %v; want a run error with %q", res, err, tc.want)
			}
		})
	}
}

func TestScriptStreamsWordsAndTools(t *testing.T) {
	rt := mustNew(t, loadAgents(t, `
agents:
  list:
    - id: a
      script:
        rules:
          - tool: {name: sessions_list, params: {limit: 1}}
            reply: "found  {{result.count}} rows"
`)["a"])
	rec := &recorder{}
	res, err := rt.Run(context.Background(), Turn{Message: "go", Emit: rec.emit}, &fakeTools{results: map[string]string{"sessions_list": `{"count":3}`}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.events {
		got = append(got, e.Type+":"+e.Delta+e.Tool)
	}
	want := "tool_call:sessions_list|tool_result:sessions_list|text:found  |text:3 |text:rows"
	if strings.Join(got, "|") != want || rec.text() != res.Reply {
		t.Fatalf("events %q, want %q (reply %q)", strings.Join(got, "|"), want, res.Reply)
	}
}
