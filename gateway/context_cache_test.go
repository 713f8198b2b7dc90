package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// modelLog is an OpenAI-compatible endpoint that answers every turn "ok"
// and keeps the messages each request carried: the context the model got.
type modelLog struct {
	mu   sync.Mutex
	reqs []string
	srv  *httptest.Server
}

func newModelLog(t *testing.T) *modelLog {
	m := &modelLog{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(raw, &body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.reqs = append(m.reqs, string(body.Messages))
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelLog) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// cacheStep is one step of cacheScenario: the stats after its turn and
// the messages the model got for it.
type cacheStep struct {
	name     string
	stats    ContextCacheStats
	messages string
}

// cacheScenario runs the same turns of an openai agent over a 300-entry
// session on one gateway with the given bus.contextCacheBytes, with the
// transcript changed between them from outside the gateway: appends by
// another writer (as a second gateway's turn would be), a compaction, an
// edit (the transcript deleted and written again with one entry changed,
// the same length and the same last entry) and a reset.
func cacheScenario(t *testing.T, cacheBytes string) []cacheStep {
	e := newEnv(t)
	model := newModelLog(t)
	e.cfg.Agents.List = append(e.cfg.Agents.List, config.Agent{ID: "llm", Runtime: "openai",
		OpenAI: map[string]any{"baseURL": model.srv.URL + "/v1", "model": "stub"}})
	e.cfg.Bus.ContextCacheBytes = cacheBytes
	g := e.gateway("g1", Options{})
	ctx := context.Background()
	const key = "agent:llm:main"
	enc := bus.EncodeKey(key)
	write := func(entries [][]byte) {
		t.Helper()
		for i := 0; i < len(entries); i += transcripts.MaxBatch {
			if _, err := e.tr.Append(ctx, enc, entries[i:min(i+transcripts.MaxBatch, len(entries))]...); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines := func(prefix string, n int) [][]byte {
		var out [][]byte
		for i := range n {
			role := []string{"user", "assistant"}[i%2]
			b, _ := json.Marshal(map[string]any{"role": role, "content": fmt.Sprintf("%s %d", prefix, i)})
			out = append(out, b)
		}
		return out
	}
	var steps []cacheStep
	turn := func(name string) {
		t.Helper()
		req := e.request(key, "llm", "turn "+name)
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != runs.OK {
			t.Fatalf("turn %s: %+v", name, rec)
		}
		reqs := model.requests()
		steps = append(steps, cacheStep{name: name, stats: g.ContextCacheStats(), messages: reqs[len(reqs)-1]})
	}
	count := func() uint64 {
		n, err := e.tr.Count(ctx, enc)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	write(lines("seed", 300))
	turn("first")
	turn("second")
	write(lines("another writer", 2))
	turn("after another writer")
	n := count()
	c, _ := json.Marshal(map[string]any{"type": "compaction", "summary": "SUMMARY OF THE SEED", "firstKeptEntry": n - 4, "compactionCount": 1, "operationId": "op-outside"})
	write([][]byte{c})
	turn("after a compaction")
	all, err := e.tr.Read(ctx, enc, 0, count())
	if err != nil {
		t.Fatal(err)
	}
	edited := make([][]byte, len(all))
	for i, en := range all {
		edited[i] = en.Data
	}
	// an entry of the context (after the compaction's first kept one)
	i := int(n) - 2
	edited[i] = []byte(strings.Replace(string(edited[i]), `"content":"`, `"content":"EDITED `, 1))
	if err := e.tr.Delete(ctx, enc); err != nil {
		t.Fatal(err)
	}
	write(edited)
	turn("after an edit")
	if err := e.tr.Delete(ctx, enc); err != nil {
		t.Fatal(err)
	}
	write(lines("after reset", 3))
	turn("after a reset")
	return steps
}

// With the cache, a turn reads only what was appended since the last
// turn, and every change it cannot vouch for makes it read afresh; the
// model gets exactly what a gateway without the cache gives it.
func TestContextCacheSameContextAsWithout(t *testing.T) {
	with := cacheScenario(t, "64mb")
	without := cacheScenario(t, "0")
	for i := range with {
		if with[i].messages != without[i].messages {
			t.Fatalf("turn %s: the model got\n%.2000s\nwith the cache, and\n%.2000s\nwithout", with[i].name, with[i].messages, without[i].messages)
		}
	}
	if s := without[len(without)-1].stats; s != (ContextCacheStats{EntriesRead: s.EntriesRead}) || s.EntriesRead < 300+302+306 {
		t.Fatalf("cache off: stats %+v, want only the entries read, the first three turns the whole session each", s)
	}
	if !strings.Contains(with[3].messages, "SUMMARY OF THE SEED") || !strings.Contains(with[4].messages, "EDITED") ||
		strings.Contains(with[5].messages, "SUMMARY") || !strings.Contains(with[5].messages, "after reset 0") {
		t.Fatalf("the changes did not reach the model: %s / %s / %s", with[3].messages, with[4].messages, with[5].messages)
	}
	wants := []struct {
		hits, misses, rebuilds uint64
		read                   uint64 // entries this turn's context read (0: not checked)
	}{
		{0, 1, 0, 300}, // the whole session
		{1, 1, 0, 3},   // the entry the context ended with, the first turn's prompt and reply
		{2, 1, 0, 5},   // and the other writer's two entries
		{2, 1, 1, 0},   // a compaction among the new entries
		{2, 1, 2, 0},   // the entry it ended with is at another sequence
		{2, 1, 3, 0},   // the transcript is shorter than the context was
	}
	prev := ContextCacheStats{}
	for i, w := range wants {
		s := with[i].stats
		read := s.EntriesRead - prev.EntriesRead
		prev = s
		if s.Hits != w.hits || s.Misses != w.misses || s.Rebuilds != w.rebuilds {
			t.Fatalf("turn %s: hits %d misses %d rebuilds %d, want %d %d %d", with[i].name, s.Hits, s.Misses, s.Rebuilds, w.hits, w.misses, w.rebuilds)
		}
		if w.read > 0 && read != w.read {
			t.Fatalf("turn %s read %d entries for its context, want %d", with[i].name, read, w.read)
		}
	}
	if s := with[len(with)-1].stats; s.Sessions != 1 || s.Entries == 0 || s.Bytes == 0 || s.MaxBytes != 64<<20 {
		t.Fatalf("stats after the turns: %+v", s)
	}
}

// The cache holds at most its bound in bytes, dropping the least recently
// used session first, and keeps no context over half the bound.
func TestContextCacheEvictsByBytes(t *testing.T) {
	c := newCtxCache(1000)
	snap := func(cost, entries int) *ctxSnap {
		return &ctxSnap{cost: cost, entries: make([]transcripts.Entry, entries)}
	}
	c.put("a", snap(299, 1))
	c.put("b", snap(299, 2))
	c.put("c", snap(299, 3))
	if c.get("a", 0) == nil { // a is now the most recently used
		t.Fatal("a was not kept")
	}
	c.put("d", snap(299, 4)) // 4 x 300 > 1000: b goes
	s := c.snapshot()
	if c.get("b", 0) != nil || c.get("a", 0) == nil || c.get("c", 0) == nil || c.get("d", 0) == nil {
		t.Fatal("eviction did not take the least recently used")
	}
	if s.Bytes != 900 || s.Sessions != 3 || s.Entries != 8 || s.Evictions != 1 || s.MaxBytes != 1000 {
		t.Fatalf("stats %+v", s)
	}
	c.put("a", snap(600, 1)) // over half the bound: not kept, and the old one goes
	if c.get("a", 0) != nil {
		t.Fatal("a context over half the bound was kept")
	}
	c.put("c", nil)
	if s := c.snapshot(); s.Bytes != 300 || s.Sessions != 1 || s.Entries != 4 {
		t.Fatalf("after dropping: %+v", s)
	}
	if c.get("d", 1) != nil {
		t.Fatal("a context read in another stream generation was served")
	}
}

// promObserver is an Observer with a Prometheus registry, as the metrics
// package's is.
type promObserver struct {
	nopObserver
	reg *prometheus.Registry
}

func (o promObserver) Registry() *prometheus.Registry { return o.reg }

// The cache's figures are in the observer's registry, labelled with the
// gateway's id, while the gateway runs.
func TestContextCacheMetrics(t *testing.T) {
	e := newEnv(t)
	obs := promObserver{reg: prometheus.NewRegistry()}
	g := e.gateway("g-metrics", Options{Observer: obs})
	fams, err := obs.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "g-metrics" {
				got[f.GetName()] = true
			}
		}
	}
	for _, name := range []string{"hits_total", "misses_total", "rebuilds_total", "evictions_total", "entries_read_total", "bytes", "max_bytes", "sessions", "entries"} {
		if !got["sessionbus_context_cache_"+name] {
			t.Fatalf("sessionbus_context_cache_%s missing: %v", name, got)
		}
	}
	g.Stop()
	if fams, _ := obs.reg.Gather(); len(fams) != 0 {
		t.Fatalf("%d families left after Stop", len(fams))
	}
}

// A context from the cache weighs what a fresh read weighs too (the
// estimate compaction decides by), with and without a provider's count
// on the entries, and holds the same entries.
func TestContextCacheSameEstimate(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("g1", Options{})
	ctx := context.Background()
	const key = "agent:main:estimates"
	r := &run{g: g, req: &runqueue.Request{SessionKey: key, AgentID: "main", ExtraSystemPrompt: "be brief"}, enc: bus.EncodeKey(key)}
	limits := g.cfg.ModelLimits(r.modelRef())
	reserve := g.cfg.Agents.Defaults.Compaction.Reserve(limits.ContextWindow)
	appendEntries := func(entries ...string) {
		t.Helper()
		for _, en := range entries {
			if _, err := e.tr.Append(ctx, r.enc, []byte(en)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(step string, wantHit bool) {
		t.Helper()
		before := g.ContextCacheStats()
		got, err := r.loadContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _, err := r.loadFresh(ctx, limits, reserve)
		if err != nil {
			t.Fatal(err)
		}
		if hit := g.ContextCacheStats().Hits > before.Hits; hit != wantHit {
			t.Fatalf("%s: hit %v, want %v", step, hit, wantHit)
		}
		if got.used != want.used || got.start != want.start || got.end != want.end || got.complete != want.complete ||
			fmt.Sprint(got.history()) != fmt.Sprint(want.history()) {
			t.Fatalf("%s: cached context (used %d, start %d, end %d, %d entries) differs from a fresh read (used %d, start %d, end %d, %d entries)",
				step, got.used, got.start, got.end, len(got.entries), want.used, want.start, want.end, len(want.entries))
		}
	}
	appendEntries(`{"role":"user","content":"a question of some length"}`, `{"role":"assistant","content":"an answer"}`)
	check("first", false)
	appendEntries(`{"role":"user","content":"again"}`)
	check("no usage yet", true)
	appendEntries(`{"role":"assistant","content":"counted","__sessionbus":{"run":"r1","part":"reply","context":4321}}`, `{"role":"user","content":"after the count"}`)
	check("a provider's count", true)
	appendEntries(`{"role":"user","content":"more"}`)
	check("after the count", true)
	check("nothing new", true)
	appendEntries(`{"role":"assistant","content":"counted again","__sessionbus":{"run":"r2","part":"reply","context":9999}}`)
	check("a newer count", true)
}

// twoGatewayTurns runs turns of an openai agent over a 40-entry session
// on n gateways with the given bus.contextCacheBytes, each turn after the
// last ended, whichever gateway takes it; it returns the messages the
// model got for each turn and the gateways' cache stats.
func twoGatewayTurns(t *testing.T, n int, cacheBytes string) ([]string, []ContextCacheStats) {
	e := newEnv(t)
	model := newModelLog(t)
	e.cfg.Agents.List = append(e.cfg.Agents.List, config.Agent{ID: "llm", Runtime: "openai",
		OpenAI: map[string]any{"baseURL": model.srv.URL + "/v1", "model": "stub"}})
	e.cfg.Bus.ContextCacheBytes = cacheBytes
	var gs []*Gateway
	for i := range n {
		gs = append(gs, e.gateway(fmt.Sprintf("g%d", i+1), Options{}))
	}
	const key = "agent:llm:shared"
	for i := range 40 {
		b, _ := json.Marshal(map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("seed %d", i)})
		if _, err := e.tr.Append(context.Background(), bus.EncodeKey(key), b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		req := e.request(key, "llm", fmt.Sprintf("turn %d", i))
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != runs.OK {
			t.Fatalf("turn %d: %+v", i, rec)
		}
	}
	var stats []ContextCacheStats
	for _, g := range gs {
		stats = append(stats, g.ContextCacheStats())
	}
	return model.requests(), stats
}

// Two gateways with caches take turns of one session, each writing
// entries the other's cached context lacks: every turn's context is what
// one gateway without a cache gives the model.
func TestContextCacheTwoGatewaysWriting(t *testing.T) {
	with, stats := twoGatewayTurns(t, 2, "64mb")
	without, _ := twoGatewayTurns(t, 1, "0")
	if !slices.Equal(with, without) {
		for i := range min(len(with), len(without)) {
			if with[i] != without[i] {
				t.Fatalf("turn %d: the model got\n%.1500s\nfrom two caching gateways, and\n%.1500s\nfrom one without a cache", i, with[i], without[i])
			}
		}
		t.Fatalf("%d requests with the caches, %d without", len(with), len(without))
	}
	t.Logf("cache stats per gateway: %+v", stats)
	var hits, misses, rebuilds uint64
	for _, s := range stats {
		hits, misses, rebuilds = hits+s.Hits, misses+s.Misses, rebuilds+s.Rebuilds
	}
	// 10 turns on 2 gateways: at most one miss each, every other turn a
	// hit (nothing they wrote makes a context they hold unusable)
	if misses > 2 || hits != 10-misses || rebuilds != 0 {
		t.Fatalf("hits %d misses %d rebuilds %d over %+v", hits, misses, rebuilds, stats)
	}
}
