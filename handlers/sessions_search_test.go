package handlers_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/ops/search"
)

// optInSearch is the config a deployment needs for sessions_search.
func optInSearch(c *config.Config) { c.Tools.AlsoAllow = []string{"sessions_search"} }

// startIndexer runs a transcript search indexer and its service on s's
// server; o may set the batch and a commit hook.
func startIndexer(t *testing.T, s *handlerstest.Stack, o search.Options) *search.Indexer {
	t.Helper()
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	o.NC, o.JS, o.Names, o.Path, o.Refresh = s.Conn, js, s.Worker.Deps.Names, filepath.Join(t.TempDir(), "index.db"), 50*time.Millisecond
	in, err := search.Start(bustest.Context(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	svc, err := search.Serve(s.Conn, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop) // runs before in.Close
	return in
}

// caughtUp waits until in has indexed every transcript entry.
func caughtUp(t *testing.T, s *handlerstest.Stack, in *search.Indexer) {
	t.Helper()
	js, _ := jetstream.New(s.Conn)
	st, err := js.Stream(bustest.Context(t), s.Worker.Deps.Names.TranscriptsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	bustest.WaitFor(t, 20*time.Second, fmt.Sprintf("indexer at stream sequence %d", last), func() bool {
		st := in.Status()
		return st.State == search.StateReady && st.Applied >= last
	})
}

// hitKeys is the sorted set of sessions a sessions_search reply names.
func hitKeys(t *testing.T, res map[string]any) []string {
	t.Helper()
	rows, ok := res["results"].([]any)
	if !ok {
		t.Fatalf("no results array: %v", res)
	}
	var out []string
	for _, r := range rows {
		k := r.(map[string]any)["sessionKey"].(string)
		if k == "main" { // the display form of the main alias
			k = mainKey
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// The sessions of the visibility test: the phrase is in every one.
const (
	kidKey   = "agent:main:subagent:kid"
	otherKey = "agent:main:other"
	opsKey   = "agent:ops:main"
	devKey   = "agent:dev:main"
	phrase   = "violet comet returns"
)

func seedSearch(s *handlerstest.Stack) {
	line := `{"role":"user","content":"when the ` + phrase + `, wake me"}`
	s.Import(importer.ImportOptions{SessionKey: mainKey}, line)
	s.Import(importer.ImportOptions{SessionKey: kidKey, SpawnedBy: mainKey}, line)
	s.Import(importer.ImportOptions{SessionKey: otherKey}, line)
	s.Import(importer.ImportOptions{SessionKey: opsKey, AgentID: "ops"}, line)
	s.Import(importer.ImportOptions{SessionKey: devKey, AgentID: "dev"}, line)
	// a cron run: in its agent's part of the index, but sessions_list
	// leaves it out, so the check of each hit must too
	s.Import(importer.ImportOptions{SessionKey: "agent:main:cron:nightly:run:r1"}, line)
}

// An agent's sessions_search asks the index only for what its visibility
// lets it see and returns no hit outside that: each of self, tree, agent
// and all (with agent-to-agent off, open, and narrowed by an allow list),
// over sessions of three agents and a spawned child, all holding the
// phrase. The requests the index receives are read too: the scope is
// applied before the index is asked, not only to its answer.
func TestSessionsSearchVisibility(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		as   string
		want []string
		// what the request to the index must bound the search by
		keys, agents []string
	}{
		{"self", func(c *config.Config) { c.Tools.Sessions.Visibility = "self" }, mainKey,
			[]string{mainKey}, []string{mainKey}, nil},
		{"tree", func(c *config.Config) { c.Tools.Sessions.Visibility = "tree" }, mainKey,
			[]string{kidKey, mainKey}, []string{mainKey, kidKey}, nil},
		{"tree from another session", func(c *config.Config) { c.Tools.Sessions.Visibility = "tree" }, otherKey,
			[]string{otherKey}, []string{otherKey}, nil},
		{"agent", func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" }, mainKey,
			[]string{kidKey, mainKey, otherKey}, nil, []string{"main"}},
		{"agent, another agent", func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" }, opsKey,
			[]string{opsKey}, nil, []string{"ops"}},
		{"all, agent-to-agent off", func(c *config.Config) { c.Tools.Sessions.Visibility = "all" }, mainKey,
			[]string{kidKey, mainKey, otherKey}, nil, []string{"main"}},
		{"all, agent-to-agent open", func(c *config.Config) {
			c.Tools.Sessions.Visibility = "all"
			c.Tools.AgentToAgent.Enabled = true
		}, mainKey, []string{devKey, kidKey, mainKey, otherKey, opsKey}, nil, nil},
		{"all, agent-to-agent allow list", func(c *config.Config) {
			c.Tools.Sessions.Visibility = "all"
			c.Tools.AgentToAgent.Enabled = true
			c.Tools.AgentToAgent.Allow = []string{"main", "ops"}
		}, mainKey, []string{kidKey, mainKey, otherKey, opsKey}, nil, []string{"main", "ops"}},
		{"all, sandboxed: clamped to the tree", func(c *config.Config) { c.Tools.Sessions.Visibility = "all" }, "sandboxed",
			[]string{kidKey, mainKey}, []string{mainKey, kidKey}, nil},
	} {
		slices.Sort(tc.want)
		t.Run(tc.name, func(t *testing.T) {
			s := handlerstest.Start(t, func(c *config.Config) { optInSearch(c); tc.edit(c) })
			seedSearch(s)
			in := startIndexer(t, s, search.Options{})
			caughtUp(t, s, in)
			asked, err := s.Conn.SubscribeSync(s.Worker.Deps.Names.Search())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = asked.Unsubscribe() }()
			if err := s.Conn.Flush(); err != nil {
				t.Fatal(err)
			}
			caller := bus.Caller{SessionKey: tc.as}
			if tc.as == "sandboxed" {
				caller = bus.Caller{SessionKey: mainKey, Sandboxed: true}
			}
			res, err := s.CallAs(caller, "sessions_search", `{"query":"`+phrase+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			if got := hitKeys(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("hits in %v, want %v", got, tc.want)
			}
			m, err := asked.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("the index was not asked: %v", err)
			}
			var req struct {
				SessionKeys []string `json:"sessionKeys"`
				Agents      []string `json:"agents"`
			}
			if err := json.Unmarshal(m.Data, &req); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(req.SessionKeys, tc.keys) || !slices.Equal(req.Agents, tc.agents) {
				t.Errorf("the index was asked for keys %v agents %v, want keys %v agents %v (%s)", req.SessionKeys, req.Agents, tc.keys, tc.agents, m.Data)
			}
			// one session named: its hits only, or the guard's refusal
			one, err := s.CallAs(caller, "sessions_search", `{"query":"`+phrase+`","sessionKey":"`+tc.want[0]+`"}`)
			if err != nil || !slices.Equal(hitKeys(t, one), tc.want[:1]) {
				t.Errorf("sessionKey %s: %v %v", tc.want[0], one, err)
			}
			if !slices.Contains(tc.want, devKey) {
				out, err := s.CallAs(caller, "sessions_search", `{"query":"`+phrase+`","sessionKey":"`+devKey+`"}`)
				if err != nil || out["status"] != "forbidden" || out["results"] != nil {
					t.Errorf("sessionKey %s outside the visibility: %v %v", devKey, out, err)
				}
			}
		})
	}
}

// A hit's fields: the entry's place in the transcript, its session's
// sessionId, the snippet with the match marked and credentials masked.
func TestSessionsSearchHitFields(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		optInSearch(c)
		c.Tools.Sessions.Visibility = "agent"
	})
	imp := s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"first"}`,
		`{"role":"assistant","content":"the `+phrase+` with OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123"}`)
	for i := range 3 {
		s.Import(importer.ImportOptions{SessionKey: fmt.Sprintf("agent:main:p%d", i)}, `{"role":"user","content":"page `+phrase+`"}`)
	}
	in := startIndexer(t, s, search.Options{})
	caughtUp(t, s, in)
	res := s.MustCall(mainKey, "sessions_search", `{"query":"comet returns with","limit":5}`)
	rows := res["results"].([]any)
	if len(rows) != 1 || res["count"] != 1.0 || res["hasMore"] != false {
		t.Fatalf("%v", res)
	}
	h := rows[0].(map[string]any)
	if h["sessionKey"] != mainKey || h["sessionId"] != imp.SessionID || h["seq"] != 2.0 || h["role"] != "assistant" || h["timestamp"].(float64) <= 0 {
		t.Errorf("hit %v", h)
	}
	snip := h["snippet"].(string)
	if !strings.Contains(snip, "«comet returns with»") || strings.Contains(snip, "abcdefghijklmnopqrstuvwxyz0123") {
		t.Errorf("snippet %q: want the match marked and the key masked", snip)
	}
	page := s.MustCall(mainKey, "sessions_search", `{"query":"`+phrase+`","limit":2}`)
	if len(page["results"].([]any)) != 2 || page["hasMore"] != true || page["nextOffset"] != 2.0 {
		t.Fatalf("first page %v", page)
	}
	rest := s.MustCall(mainKey, "sessions_search", `{"query":"`+phrase+`","limit":2,"offset":2}`)
	if len(rest["results"].([]any)) != 2 || rest["hasMore"] != false {
		t.Fatalf("second page %v", rest)
	}
}

// The tool is off until config names it, in every profile; a leaf
// sub-agent is refused it even then; a bad query is refused before the
// index is asked; no indexer and an index being rebuilt are 503s that say
// what to do.
func TestSessionsSearchPolicyAndErrors(t *testing.T) {
	optIn := `sessions_search is not available to any session until config names it (an opt-in tool: list "sessions_search" in tools.alsoAllow or tools.allow)`
	checkPolicy(t, handlerstest.Start(t, nil), []policyCase{{mainKey, "sessions_search", `{"query":"x"}`, optIn}})
	checkPolicy(t, handlerstest.Start(t, func(c *config.Config) { c.Tools.Profile = "full" }), []policyCase{{mainKey, "sessions_search", `{"query":"x"}`, optIn}})
	checkPolicy(t, handlerstest.Start(t, func(c *config.Config) { c.Tools.AlsoAllow = []string{"group:sessions"} }), []policyCase{{mainKey, "sessions_search", `{"query":"x"}`, optIn}})
	checkPolicy(t, handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Profile = "coding"
		c.Tools.Allow = []string{"sessions_search", "sessions_list"}
	}), []policyCase{{mainKey, "sessions_search", `{"query":"x"}`,
		`sessions_search is not available to the "coding" tool profile (tools.profile; list it in tools.alsoAllow to add it)`}})
	checkPolicy(t, handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Profile = "messaging"
		c.Tools.AlsoAllow = []string{"sessions_search"}
	}), []policyCase{{mainKey, "sessions_search", `{"query":"x"}`, ""}})

	s := handlerstest.Start(t, optInSearch)
	s.Import(importer.ImportOptions{SessionKey: kidKey, SpawnedBy: mainKey}, `{"role":"user","content":"task"}`)
	checkPolicy(t, s, []policyCase{
		{kidKey, "sessions_search", `{"query":"x"}`, "sessions_search is not available to leaf sub-agent sessions (tools.subagents leaf deny list: depth 1 of agents.defaults.subagents.maxSpawnDepth 1)"},
		{mainKey, "sessions_search", `{"query":"x"}`, ""},
	})

	asked, err := s.Conn.SubscribeSync(s.Worker.Deps.Names.Search())
	if err != nil {
		t.Fatal(err)
	}
	for params, want := range map[string]string{
		`{}`:              "query required",
		`{"query":"   "}`: "query required",
		`{"query":"` + strings.Repeat("é", 513) + `"}`: "query must not exceed 512 characters",
		`{"query":"!!!"}`:              "no letter or digit",
		`{"query":"x","limit":26}`:     "limit must be at most 25",
		`{"query":"x","limit":0}`:      "limit must be a positive integer",
		`{"query":"x","offset":10001}`: "offset must be at most 10000",
		`{"query":"x","sessionKey":7}`: "sessionKey must be a string",
	} {
		_, err := s.Call(mainKey, "sessions_search", params)
		if !bustest.IsCode(err, bus.CodeBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40s: %v, want a 400 saying %q", params, err, want)
		}
	}
	if m, err := asked.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("a refused call asked the index: %s", m.Data)
	}
	if err := asked.Unsubscribe(); err != nil { // it would answer nothing, as an overloaded indexer
		t.Fatal(err)
	}

	// no indexer
	_, err = s.Call(mainKey, "sessions_search", `{"query":"task"}`)
	if !bustest.IsCode(err, bus.CodeUnavailable) || !strings.Contains(err.Error(), "sessionbus indexer") || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("without an indexer: %v", err)
	}

	// an index being rebuilt: the indexer's 503 with its progress is
	// passed on as it is (ops/search tests that the indexer sends it)
	const rebuilding = "the search index is being rebuilt: 41% (stream sequence 410233 of 1000000); search again when it is done"
	fake, err := s.Conn.Subscribe(s.Worker.Deps.Names.Search(), func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{bus.HeaderServiceErr: []string{rebuilding}, bus.HeaderServiceCode: []string{"503"}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Call(mainKey, "sessions_search", `{"query":"task"}`)
	if !bustest.IsCode(err, bus.CodeUnavailable) || !strings.Contains(err.Error(), rebuilding) {
		t.Fatalf("while the index is rebuilt: %v", err)
	}
	if err := fake.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	// and once an indexer runs, the same call finds the child's entry
	in := startIndexer(t, s, search.Options{})
	caughtUp(t, s, in)
	if res := s.MustCall(mainKey, "sessions_search", `{"query":"task"}`); !slices.Equal(hitKeys(t, res), []string{kidKey}) {
		t.Fatalf("with an indexer: %v", res)
	}
}
