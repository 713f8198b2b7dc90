package runtime

import (
	"context"
	"net/http"
	"testing"
)

// TestOpenAIThinkingIsReasoningEffort: a turn's thinking level reaches the
// endpoint as reasoning_effort, OpenClaw's mapping; off, none or an
// unknown stored level sends no reasoning_effort at all.
func TestOpenAIThinkingIsReasoningEffort(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse("ok")) })
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	for _, tc := range []struct{ level, want string }{
		{"minimal", "minimal"}, {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "xhigh"},
		{"HIGH", "high"}, {"x-high", "xhigh"}, {"extra high", "xhigh"}, {"highest", "high"},
		{"adaptive", "medium"}, {"max", "xhigh"},
		{"off", ""}, {"", ""}, {"bogus", ""},
	} {
		if _, err := rt.Run(context.Background(), Turn{Message: "hi", Thinking: tc.level}, nil); err != nil {
			t.Fatal(err)
		}
		got, has := s.body(s.requests() - 1)["reasoning_effort"]
		if tc.want == "" {
			if has {
				t.Errorf("thinking %q: sent reasoning_effort %v, want none", tc.level, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("thinking %q: reasoning_effort %v, want %s", tc.level, got, tc.want)
		}
	}
}
