package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/ops/search"
)

// startIndexer runs a transcript search indexer on the fixture's
// deployment, as serve runs one, until the test ends.
func (f *fixture) startIndexer() *search.Indexer {
	f.t.Helper()
	js, err := jetstream.New(f.stack.Conn)
	if err != nil {
		f.t.Fatal(err)
	}
	o := search.Options{NC: f.stack.Conn, JS: js, Names: bus.NewNames(f.stack.Config.Bus.Prefix),
		Path: filepath.Join(f.t.TempDir(), "index.db"), Refresh: 50 * time.Millisecond}
	in, err := search.Start(bustest.Context(f.t), o)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(in.Close)
	svc, err := search.Serve(f.stack.Conn, in)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(svc.Stop)
	// searched only once built: the indexer answers a search during its
	// rebuild from a goroutine with micro's Request.Error, which races
	// with micro's own statistics of the request (ops/search's to fix);
	// the console's rebuild state is tested with fakeIndexer
	bustest.WaitFor(f.t, 30*time.Second, "the search index built", func() bool { return in.Status().State == search.StateReady })
	return in
}

// fakeIndexer answers the search subject with answer's reply to each
// request's body, until stop.
func (f *fixture) fakeIndexer(answer func(body []byte) *nats.Msg) (stop func()) {
	f.t.Helper()
	sub, err := f.stack.Conn.Subscribe(bus.NewNames(f.stack.Config.Bus.Prefix).Search(), func(m *nats.Msg) {
		_ = m.RespondMsg(answer(m.Data))
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return func() { _ = sub.Unsubscribe() }
}

// rebuilding answers as an indexer does while its index is rebuilt: a
// search is refused with a 503 (micro's error headers), a status request
// is answered with the rebuild's progress.
func rebuilding(body []byte) *nats.Msg {
	if strings.Contains(string(body), `"status":true`) {
		b, _ := json.Marshal(search.Result{Results: []search.Hit{}, Index: search.Status{State: search.StateRebuilding, Applied: 410, Last: 1000, Lag: 590, Target: 1000, Percent: 41}})
		return &nats.Msg{Data: b}
	}
	m := &nats.Msg{Header: nats.Header{}}
	m.Header.Set(bus.HeaderServiceErr, "the search index is being rebuilt: 41% (stream sequence 410 of 1000); search again when it is done")
	m.Header.Set(bus.HeaderServiceCode, "503")
	return m
}

// appendTo creates key's session (agent main) and appends one message a
// text, alternately a user's and an assistant's.
func (f *fixture) appendTo(key string, texts ...string) {
	f.t.Helper()
	f.stack.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	var raw [][]byte
	for i, t := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b, _ := json.Marshal(map[string]any{"role": role, "content": t})
		raw = append(raw, b)
	}
	if _, err := f.stack.Worker.Deps.Transcripts.Append(context.Background(), bus.EncodeKey(key), raw...); err != nil {
		f.t.Fatal(err)
	}
}

// searchAs posts a search with the action header and decodes the answer.
func (f *fixture) searchAs(hc *http.Client, req map[string]any) (int, console.SearchPage, string) {
	f.t.Helper()
	code, body := f.do(hc, "POST", "/api/search", req, true)
	var p console.SearchPage
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		f.t.Fatalf("search answer %d: %v: %s", code, err, body)
	}
	return code, p, body
}

// waitHits waits until a search for q finds n hits on its first page.
func (f *fixture) waitHits(hc *http.Client, q string, n int) console.SearchPage {
	f.t.Helper()
	var p console.SearchPage
	bustest.WaitFor(f.t, 30*time.Second, fmt.Sprintf("%d hits for %q", n, q), func() bool {
		var code int
		code, p, _ = f.searchAs(hc, map[string]any{"query": q})
		return code == 200 && len(p.Results) == n
	})
	return p
}

const hostileText = `the quokka parliament met <img src=x onerror="window.pwned=1"><script>window.pwned=2</script> «fake» mark`

// The search endpoint: the states a page must tell apart (no indexer, a
// rebuild with its progress, a bad query, no hits, hits), a hit's parts
// with the match marked and hostile text kept as text, the filters and
// paging, and who may ask.
func TestSearchEndpoint(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:quokkas"
	f.appendTo(key, "before anything", hostileText)
	var many []string
	for i := range 27 {
		many = append(many, fmt.Sprintf("wombat census line %d", i))
	}
	f.appendTo("agent:main:group:wombats", many...)
	admin := f.client(f.credsText(auth.RoleAdmin))

	// a bad query is said before an indexer is asked
	for q, want := range map[string]string{"": "empty query", "!!!": "no letter", strings.Repeat("a", search.MaxQueryChars+1): "at most"} {
		code, p, body := f.searchAs(admin, map[string]any{"query": q})
		if code != 400 || p.State != "bad-query" || !strings.Contains(p.Error, want) {
			t.Fatalf("query %.20q: %d %s, want 400 bad-query saying %q", q, code, body, want)
		}
	}
	if code, p, body := f.searchAs(admin, map[string]any{"query": "x", "since": "yesterday"}); code != 400 || p.State != "bad-query" || !strings.Contains(p.Error, "RFC 3339") {
		t.Fatalf("a bad time: %d %s", code, body)
	}
	if code, p, body := f.searchAs(admin, map[string]any{"query": "x", "offset": search.MaxOffset + 1}); code != 400 || p.State != "bad-query" {
		t.Fatalf("an offset past the index's: %d %s", code, body)
	}

	// no indexer runs
	if code, p, body := f.searchAs(admin, map[string]any{"query": "quokka"}); code != 503 || p.State != "no-indexer" || !strings.Contains(p.Error, "sessionbus indexer") {
		t.Fatalf("no indexer: %d %s, want 503 no-indexer saying to start one", code, body)
	}

	// an indexer rebuilding its index: the answer carries its progress,
	// which the indexer tells a status request (its refusal is text)
	stop := f.fakeIndexer(rebuilding)
	code, p, body := f.searchAs(admin, map[string]any{"query": "quokka"})
	stop()
	if code != 503 || p.State != "rebuilding" || p.Index == nil || p.Index.Percent != 41 || p.Index.Target != 1000 || !strings.Contains(p.Error, "rebuilt") {
		t.Fatalf("while rebuilding: %d %s, want 503 rebuilding with the index's progress", code, body)
	}
	// a 503 that is no rebuild (this indexer stopped) is said as it is
	stop = f.fakeIndexer(func([]byte) *nats.Msg {
		m := &nats.Msg{Header: nats.Header{}}
		m.Header.Set(bus.HeaderServiceErr, "this search indexer stopped (disk full): restart `sessionbus indexer`")
		m.Header.Set(bus.HeaderServiceCode, "503")
		return m
	})
	code, p, body = f.searchAs(admin, map[string]any{"query": "quokka"})
	stop()
	if code != 503 || p.State != "unavailable" || !strings.Contains(p.Error, "disk full") {
		t.Fatalf("a stopped indexer: %d %s, want 503 unavailable with its reason", code, body)
	}

	f.startIndexer()

	p = f.waitHits(admin, "quokka parliament", 1)
	h := p.Results[0]
	if h.SessionKey != key || h.Role != "assistant" || h.Entry != 2 || h.Seq == 0 || h.Timestamp == 0 || p.Index == nil || p.Index.State != search.StateReady {
		t.Fatalf("the hit: %+v (index %+v)", h, p.Index)
	}
	var marked, text []string
	for _, part := range h.Parts {
		if part.Mark {
			marked = append(marked, part.Text)
		} else {
			text = append(text, part.Text)
		}
	}
	if got := strings.Join(marked, " "); !strings.Contains(got, "quokka") || !strings.Contains(got, "parliament") || strings.Contains(got, "img") {
		t.Fatalf("marked parts %q of %+v", marked, h.Parts)
	}
	// the transcript's markup is text in the parts, to be made text nodes
	if got := strings.Join(text, ""); !strings.Contains(got, "<img") && !strings.Contains(got, "onerror") {
		t.Fatalf("unmarked parts %q: the hostile text should be there as text", text)
	}
	if code, p, _ := f.searchAs(admin, map[string]any{"query": "no such words anywhere"}); code != 200 || p.State != "ready" || len(p.Results) != 0 || p.Index == nil {
		t.Fatalf("no hits: %d %+v", code, p)
	}

	// filters: agent and time range
	if _, p, _ := f.searchAs(admin, map[string]any{"query": "quokka parliament", "agent": "slow"}); len(p.Results) != 0 {
		t.Fatalf("agent slow: %+v", p.Results)
	}
	if _, p, _ := f.searchAs(admin, map[string]any{"query": "quokka parliament", "agent": "main"}); len(p.Results) != 1 {
		t.Fatalf("agent main: %+v", p.Results)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if _, p, _ := f.searchAs(admin, map[string]any{"query": "quokka parliament", "until": past}); len(p.Results) != 0 {
		t.Fatalf("until an hour ago: %+v", p.Results)
	}
	if _, p, _ := f.searchAs(admin, map[string]any{"query": "quokka parliament", "since": past}); len(p.Results) != 1 {
		t.Fatalf("since an hour ago: %+v", p.Results)
	}

	// paging: 27 hits are a page of 25 and one of 2
	first := f.waitHits(admin, "wombat census", search.MaxResults)
	if !first.More || first.Offset != 0 || first.Limit != search.MaxResults {
		t.Fatalf("first page: more %v offset %d limit %d", first.More, first.Offset, first.Limit)
	}
	code, second, body := f.searchAs(admin, map[string]any{"query": "wombat census", "offset": 25})
	if code != 200 || len(second.Results) != 2 || second.More {
		t.Fatalf("second page: %d %s", code, body)
	}
	seen := map[uint64]bool{}
	for _, h := range append(first.Results, second.Results...) {
		if seen[h.Seq] {
			t.Fatalf("entry %d on both pages", h.Seq)
		}
		seen[h.Seq] = true
	}

	// an ops login searches too: the ops role may publish the subject
	ops := f.client(f.credsText(auth.RoleOps))
	if code, p, body := f.searchAs(ops, map[string]any{"query": "quokka parliament"}); code != 200 || len(p.Results) != 1 {
		t.Fatalf("ops: %d %s", code, body)
	}
}

// Who may not search, each tried as an attacker would: no login, a
// forged cookie, a session's token (its tools see one session; the
// search reads all), a request without the action header (what another
// page, even one on another port of this host, could make a logged-in
// browser send), a plain GET, and a body with fields the page never
// sends. None reaches the indexer.
func TestSearchRefusals(t *testing.T) {
	f := newFixture(t)
	f.appendTo("agent:main:group:secret", "the launch code is quokka")
	asked := make(chan struct{}, 16)
	defer f.fakeIndexer(func([]byte) *nats.Msg {
		asked <- struct{}{}
		return &nats.Msg{Data: []byte(`{"results":[],"more":false,"offset":0,"order":"newest","index":{"state":"ready"}}`)}
	})()

	q := map[string]any{"query": "launch code"}
	if code, body := f.do(f.client(""), "POST", "/api/search", q, true); code != 401 {
		t.Fatalf("no login: %d %s, want 401", code, body)
	}
	forged := f.client("")
	req, _ := http.NewRequest("GET", f.c.URL(), nil)
	forged.Jar.SetCookies(req.URL, []*http.Cookie{{Name: "sb_console", Value: "0123456789abcdef0123456789abcdef"}})
	if code, body := f.do(forged, "POST", "/api/search", q, true); code != 401 {
		t.Fatalf("a forged cookie: %d %s, want 401", code, body)
	}
	tokUser := f.client("")
	if code, body := f.do(tokUser, "POST", "/api/login", map[string]any{"token": f.stack.Token(bus.Caller{SessionKey: mainKey})}, false); code != 200 {
		t.Fatalf("token login: %d %s", code, body)
	}
	if code, body := f.do(tokUser, "POST", "/api/search", q, true); code != 403 || !strings.Contains(body, "credentials login") {
		t.Fatalf("a token login: %d %s, want 403", code, body)
	}
	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "POST", "/api/search", q, false); code != 403 || !strings.Contains(body, "X-Sessionbus-Console") {
		t.Fatalf("without the action header: %d %s, want 403", code, body)
	}
	// a GET (an <img> or a link could send one) is no search: the static
	// files answer it with a 404
	if code, body := f.do(admin, "GET", "/api/search?query=launch+code", nil, true); code != 404 {
		t.Fatalf("GET: %d %s, want 404", code, body)
	}
	if code, body := f.do(admin, "POST", "/api/search", map[string]any{"query": "launch code", "sessionKeys": []string{"x"}}, true); code != 400 {
		t.Fatalf("a field the page never sends: %d %s, want 400", code, body)
	}
	select {
	case <-asked:
		t.Fatal("a refused request reached the search subject")
	default:
	}
	// the same request with the header and an admin login does reach it
	if code, body := f.do(admin, "POST", "/api/search", q, true); code != 200 {
		t.Fatalf("the admin's search: %d %s, want 200", code, body)
	}
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the admin's search never reached the search subject")
	}
}

// A hit opens its session at that message: asked for an entry older than
// the newest page, the session's transcript is the page around it, each
// message with its stream sequence; without, the newest page.
func TestSessionAroundEntry(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:long"
	var texts []string
	for i := range 300 {
		texts = append(texts, fmt.Sprintf("line %d", i))
	}
	texts[10] = "the needle in line ten"
	f.appendTo(key, texts...)
	admin := f.client(f.credsText(auth.RoleAdmin))
	type page struct {
		History struct {
			First    uint64 `json:"first"`
			Total    uint64 `json:"totalEntries"`
			Messages []struct {
				Content string `json:"content"`
				Console struct {
					N   uint64 `json:"n"`
					Seq uint64 `json:"seq"`
				} `json:"__console"`
			} `json:"messages"`
		} `json:"history"`
	}
	get := func(q string) page {
		code, body := f.do(admin, "GET", "/api/session?key="+key+q, nil, false)
		if code != 200 {
			t.Fatalf("session%s: %d %s", q, code, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tail := get("")
	if tail.History.First != 100 || tail.History.Total != 300 || len(tail.History.Messages) != 200 {
		t.Fatalf("the newest page: first %d of %d, %d messages", tail.History.First, tail.History.Total, len(tail.History.Messages))
	}
	at := get("&entry=11") // 1-based, as a search hit names it
	found := false
	for _, m := range at.History.Messages {
		if m.Console.Seq == 0 {
			t.Fatalf("a message without its stream sequence: %+v", m)
		}
		if m.Content == "the needle in line ten" && m.Console.N == 10 {
			found = true
		}
	}
	if !found || at.History.First != 0 {
		t.Fatalf("around entry 11: first %d, needle found %v", at.History.First, found)
	}
	if recent := get("&entry=290"); recent.History.First != 100 {
		t.Fatalf("an entry in the newest page keeps the newest page: first %d", recent.History.First)
	}
}
