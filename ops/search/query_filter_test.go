package search

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// keysOf is the sorted set of session keys of hits.
func keysOf(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		if !slices.Contains(out, h.SessionKey) {
			out = append(out, h.SessionKey)
		}
	}
	slices.Sort(out)
	return out
}

// The sessions_search tool narrows every search to the sessions its caller
// may see with these filters: a hit outside them is a leak.
func TestSessionKeyAndAgentFilters(t *testing.T) {
	r := newRig(t)
	for _, k := range []string{"agent:main:a", "agent:main:b", "agent:ops:c", "agent:dev:d"} {
		r.session(k, "the amber lighthouse blinked twice", "noted")
	}
	in := r.start(Options{})
	defer in.Close()
	r.caughtUp(in)

	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{``, []string{"agent:dev:d", "agent:main:a", "agent:main:b", "agent:ops:c"}},
		{`"sessionKeys":["agent:main:a"]`, []string{"agent:main:a"}},
		{`"sessionKeys":["agent:main:a","agent:ops:c","agent:none:x"]`, []string{"agent:main:a", "agent:ops:c"}},
		{`"agents":["ops","DEV"]`, []string{"agent:dev:d", "agent:ops:c"}},
		{`"agents":["nobody"]`, nil},
		{`"agents":["main","ops"],"sessionKeys":["agent:main:b","agent:dev:d"]`, []string{"agent:main:b"}},
		{`"agent":"main","agents":["ops"]`, nil},
	} {
		body := `{"query":"amber lighthouse"`
		if tc.filter != "" {
			body += "," + tc.filter
		}
		q, err := Parse([]byte(body + "}"))
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		res, err := in.Search(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := keysOf(res.Results); !slices.Equal(got, tc.want) {
			t.Errorf("filter {%s}: sessions %v, want %v", tc.filter, got, tc.want)
		}
	}

	many := make([]string, MaxAgents+1)
	for i := range many {
		many[i] = fmt.Sprintf("a%d", i)
	}
	b, _ := json.Marshal(map[string]any{"query": "amber", "agents": many})
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "agents") {
		t.Fatalf("%d agents: %v, want a refusal naming agents", len(many), err)
	}
}
