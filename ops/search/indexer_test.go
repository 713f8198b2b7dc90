package search

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/streams/transcripts"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/archives"
)

// secret is a credential the default redactor masks (an OpenAI key).
const secret = "sk-proj-Zq81LmXv03TqPa7sWnYb42Kc"

func TestPhraseFoundOnceSecretNot(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:a", "hello there", "the purple walrus sings at dawn", "unrelated chatter")
	r.session("agent:ops:b", "my key is "+secret+" keep it", "purple is a colour; walrus a mammal")
	in := r.start(Options{})
	defer in.Close()
	r.caughtUp(in)

	hits := r.find(in, "Purple Walrus sings")
	if len(hits) != 1 {
		t.Fatalf("phrase written once: %d hits %+v, want 1", len(hits), hits)
	}
	h := hits[0]
	e, _, err := r.ss.Get(bustest.Context(t), "agent:main:a")
	if err != nil {
		t.Fatal(err)
	}
	if h.SessionKey != "agent:main:a" || h.SessionID != e.SessionID || h.Entry != 2 || h.Role != "assistant" || h.Timestamp == 0 {
		t.Fatalf("hit %+v: want agent:main:a, sessionId %s, entry 2, assistant", h, e.SessionID)
	}
	if !strings.Contains(h.Snippet, MarkOpen+"purple walrus sings"+MarkClose) {
		t.Fatalf("snippet %q does not mark the match", h.Snippet)
	}
	if got := r.find(in, secret); len(got) != 0 {
		t.Fatalf("a redacted secret was found: %+v", got)
	}
	if got := r.find(in, "Zq81LmXv03TqPa7sWnYb42Kc"); len(got) != 0 {
		t.Fatalf("part of a redacted secret was found: %+v", got)
	}
	if got := r.find(in, "keep it"); len(got) != 1 {
		t.Fatalf("the text around the secret: %d hits, want 1", len(got))
	}
	// filters
	q, _ := Parse([]byte(`{"query":"purple","agent":"ops"}`))
	res, err := in.Search(bustest.Context(t), q)
	if err != nil || len(res.Results) != 1 || res.Results[0].SessionKey != "agent:ops:b" {
		t.Fatalf("agent filter: %+v %v", res, err)
	}
	if res.Index.Lag != 0 || res.Index.Applied == 0 || res.Index.State != StateReady {
		t.Fatalf("freshness %+v", res.Index)
	}
	q, _ = Parse([]byte(`{"query":"purple","channel":"telegram"}`))
	if res, err := in.Search(bustest.Context(t), q); err != nil || len(res.Results) != 0 {
		t.Fatalf("channel filter: %+v %v", res, err)
	}
	q, _ = Parse([]byte(fmt.Sprintf(`{"query":"purple","since":%d}`, time.Now().Add(time.Hour).UnixMilli())))
	if res, err := in.Search(bustest.Context(t), q); err != nil || len(res.Results) != 0 {
		t.Fatalf("since filter: %+v %v", res, err)
	}
}

func TestDeletedAndResetSessionsLeave(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:gone", "the zebra ledger")
	r.session("agent:main:reset", "the okapi ledger")
	r.session("agent:main:stays", "the ibex ledger")
	in := r.start(Options{})
	defer in.Close()
	r.caughtUp(in)
	if n := len(r.find(in, "ledger")); n != 3 {
		t.Fatalf("%d hits before, want 3", n)
	}
	ctx := bustest.Context(t)
	if _, err := r.ops.Delete(ctx, "agent:main:gone", archives.ReasonDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ops.Reset(ctx, "agent:main:reset", nil); err != nil {
		t.Fatal(err)
	}
	r.session("agent:main:reset", "a fresh ledger")
	bustest.WaitFor(t, 20*time.Second, "deleted and reset text gone", func() bool {
		return len(r.find(in, "zebra")) == 0 && len(r.find(in, "okapi")) == 0 && len(r.find(in, "fresh ledger")) == 1
	})
	if n := len(r.find(in, "ibex")); n != 1 {
		t.Fatalf("untouched session: %d hits, want 1", n)
	}
	// a session deleted while no indexer runs leaves at the next start
	in.Close()
	if _, err := r.ops.Delete(ctx, "agent:main:stays", archives.ReasonDeleted, nil); err != nil {
		t.Fatal(err)
	}
	in = r.start(Options{})
	defer in.Close()
	r.caughtUp(in)
	bustest.WaitFor(t, 20*time.Second, "text of a session deleted while stopped gone", func() bool {
		return len(r.find(in, "ibex")) == 0
	})
}

var errCrash = errors.New("crash before commit")

// An indexer that dies inside a batch (its transaction never commits)
// resumes from the last batch that did: every entry is found exactly
// once.
func TestKilledMidLoadResumes(t *testing.T) {
	r := newRig(t)
	const sessionsN, perSession = 20, 30
	for s := range sessionsN {
		texts := make([]string, perSession)
		for i := range texts {
			texts[i] = fmt.Sprintf("marker s%dm%d common", s, i)
		}
		r.session(fmt.Sprintf("agent:main:s%d", s), texts...)
	}
	commits := 0
	in := r.start(Options{Batch: 50, BeforeCommit: func(int) error {
		commits++
		if commits == 4 {
			return errCrash
		}
		return nil
	}})
	bustest.WaitFor(t, 20*time.Second, "the indexer to stop mid-load", func() bool { return in.Err() != nil })
	applied := in.Status().Applied
	in.Close()
	if applied == 0 || applied >= sessionsN*perSession {
		t.Fatalf("applied %d before the crash: want part of %d", applied, sessionsN*perSession)
	}
	in = r.start(Options{Batch: 50})
	defer in.Close()
	r.caughtUp(in)
	n, err := in.Index().Count(bustest.Context(t))
	if err != nil || n != sessionsN*perSession {
		t.Fatalf("%d entries indexed (%v), want %d", n, err, sessionsN*perSession)
	}
	for s := range sessionsN {
		for i := range perSession {
			if hits := r.find(in, fmt.Sprintf("s%dm%d", s, i)); len(hits) != 1 {
				t.Fatalf("s%dm%d: %d hits, want 1", s, i, len(hits))
			}
		}
	}
}

// While an index is built from the stream, a search is refused with how
// far the build is.
func TestSearchWhileRebuilding(t *testing.T) {
	r := newRig(t)
	for s := range 5 {
		r.session(fmt.Sprintf("agent:main:r%d", s), "alpha", "beta", "gamma", "delta")
	}
	release := make(chan struct{})
	var rowsCommitted atomic.Bool // the writer blocks once some rows are in
	in := r.start(Options{Batch: 5, BeforeCommit: func(rows int) error {
		if rowsCommitted.Load() {
			<-release
		}
		if rows > 0 {
			rowsCommitted.Store(true)
		}
		return nil
	}})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer in.Close()
	defer open() // before Close, which waits for the writer
	bustest.WaitFor(t, 10*time.Second, "first batch committed", func() bool { return in.Status().Applied > 0 })
	q, _ := Parse([]byte(`{"query":"alpha"}`))
	_, err := in.Search(bustest.Context(t), q)
	if !bustest.IsCode(err, 503) || !strings.Contains(err.Error(), "rebuilt") || !strings.Contains(err.Error(), "%") {
		t.Fatalf("search while rebuilding: %v", err)
	}
	open()
	r.caughtUp(in)
	if n := len(r.find(in, "alpha")); n != 5 {
		t.Fatalf("%d hits after the rebuild, want 5", n)
	}
}

func TestRebuildOnDemand(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:x", "capybara council")
	in := r.start(Options{})
	r.caughtUp(in)
	in.Close()
	in = r.start(Options{Rebuild: true})
	defer in.Close()
	r.caughtUp(in)
	if n := len(r.find(in, "capybara council")); n != 1 {
		t.Fatalf("%d hits after a rebuild, want 1", n)
	}
	if in.Status().Entries != 1 {
		t.Fatalf("rebuild indexed %d entries, want 1", in.Status().Entries)
	}
}

// The sessions bucket is followed for as long as the indexer runs, not
// only while the context Start was given lives (a command cancels it once
// started): a session created later has its facts in the hits.
func TestSessionsFollowedAfterStart(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(bustest.Context(t))
	in, err := Start(ctx, Options{NC: r.nc, JS: r.js, Names: r.names, Path: filepath.Join(r.dir, "s.db"), Refresh: 50 * time.Millisecond})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r.session("agent:main:late", "the heron almanac")
	e, _, err := r.ss.Get(bustest.Context(t), "agent:main:late")
	if err != nil {
		t.Fatal(err)
	}
	r.caughtUp(in)
	bustest.WaitFor(t, 10*time.Second, "the late session's facts", func() bool {
		hits := r.find(in, "heron almanac")
		return len(hits) == 1 && hits[0].SessionID == e.SessionID
	})
}

// Tool results are searchable only when the indexer is told to index
// them (search.includeTools).
func TestToolResultsOnlyWhenAsked(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:t")
	tool := []byte(`{"role":"toolResult","toolName":"exec","content":[{"type":"text","text":"the gannet manifest was written"}]}`)
	if _, err := r.tr.Append(bustest.Context(t), bus.EncodeKey("agent:main:t"), tool); err != nil {
		t.Fatal(err)
	}
	without := r.start(Options{Path: filepath.Join(r.dir, "without.db")})
	defer without.Close()
	with := r.start(Options{Path: filepath.Join(r.dir, "with.db"), WithTools: true})
	defer with.Close()
	r.caughtUp(without)
	r.caughtUp(with)
	if n := len(r.find(without, "gannet manifest")); n != 0 {
		t.Fatalf("a tool result was indexed without includeTools: %d hits", n)
	}
	if hits := r.find(with, "gannet manifest"); len(hits) != 1 || hits[0].Role != "toolResult" {
		t.Fatalf("with includeTools: %+v", hits)
	}
}

// Pages: newest first by default, the next page from offset, more while
// hits remain; by rank the best match leads.
func TestPagingAndRank(t *testing.T) {
	r := newRig(t)
	texts := make([]string, 30)
	for i := range texts {
		texts[i] = fmt.Sprintf("walrus report number %d", i)
	}
	texts[7] = "walrus walrus walrus walrus"
	r.session("agent:main:p", texts...)
	in := r.start(Options{})
	defer in.Close()
	r.caughtUp(in)
	page := func(body string) *Result {
		t.Helper()
		q, err := Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := in.Search(bustest.Context(t), q)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := page(`{"query":"walrus"}`)
	if len(first.Results) != MaxResults || !first.More || first.Results[0].Entry != 30 || first.Results[24].Entry != 6 {
		t.Fatalf("first page: %d hits, more %v, entries %d..%d", len(first.Results), first.More, first.Results[0].Entry, first.Results[len(first.Results)-1].Entry)
	}
	second := page(`{"query":"walrus","offset":25}`)
	if len(second.Results) != 5 || second.More || second.Results[0].Entry != 5 {
		t.Fatalf("second page: %+v", second)
	}
	ranked := page(`{"query":"walrus","order":"rank","limit":1}`)
	if len(ranked.Results) != 1 || ranked.Results[0].Entry != 8 {
		t.Fatalf("by rank: %+v, want entry 8 (the walrus four times) first", ranked.Results)
	}
}

// A stream deleted and recreated names other entries by the same
// sequences: the index starts over, even when the new stream has already
// outgrown what the old index applied.
func TestRecreatedStreamRebuilds(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:o", "the old alpha")
	in := r.start(Options{})
	r.caughtUp(in)
	in.Close()
	ctx := bustest.Context(t)
	if err := r.js.DeleteStream(ctx, r.names.TranscriptsStream()); err != nil {
		t.Fatal(err)
	}
	tr, err := transcripts.Open(ctx, r.nc, r.js, r.names)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Append(ctx, bus.EncodeKey("agent:main:n"), messages("new beta one", "new beta two", "new beta three")...); err != nil {
		t.Fatal(err)
	}
	in = r.start(Options{})
	defer in.Close()
	r.caughtUp(in)
	if n := len(r.find(in, "old alpha")); n != 0 {
		t.Fatalf("an entry of the deleted stream is still found: %d hits", n)
	}
	if n := len(r.find(in, "new beta")); n != 3 {
		t.Fatalf("%d hits in the new stream, want 3", n)
	}
}
