package search

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func (r *rig) serve(in *Indexer) *Service {
	r.t.Helper()
	s, err := Serve(r.nc, in)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// as connects with role's credentials of the rig's deployment.
func (r *rig) as(role auth.Role) *nats.Conn {
	r.t.Helper()
	nc, _ := bustest.ConnectURL(r.t, r.srv.URL(), nats.UserCredentials(bustest.RoleCreds(r.t, r.srv.Deployment(), role)))
	return nc
}

func ask(t testing.TB, nc *nats.Conn, body string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, bus.NewNames("").Search(), []byte(body))
	if err != nil {
		return nil, err
	}
	if d := m.Header.Get(bus.HeaderServiceErr); d != "" {
		return nil, &bus.Error{Code: atoi(m.Header.Get(bus.HeaderServiceCode)), Message: d}
	}
	return m.Data, nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func (r *rig) streamLast() uint64 {
	r.t.Helper()
	st, err := r.js.Stream(bustest.Context(r.t), r.names.TranscriptsStream())
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(bustest.Context(r.t))
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.LastSeq
}

func TestServiceRolesAndBadInput(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:a", "the quokka parliament met")
	in := r.start(Options{})
	defer in.Close()
	s := r.serve(in)
	defer s.Stop()
	r.caughtUp(in)

	for _, role := range []auth.Role{auth.RoleOps, auth.RoleAdmin} {
		res, err := Ask(bustest.Context(t), r.as(role), r.names, &Query{Text: "quokka parliament"})
		if err != nil || len(res.Results) != 1 || res.Index.State != StateReady || res.Index.Applied == 0 {
			t.Fatalf("%s: %+v %v", role, res, err)
		}
	}
	for _, role := range []auth.Role{auth.RoleAgent, auth.RoleAdapter} {
		// the server refuses the publish: no answer ever comes
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := Ask(ctx, r.as(role), r.names, &Query{Text: "quokka parliament"})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "ops or admin") {
			t.Fatalf("%s: %v, want a refusal naming the roles that may search", role, err)
		}
	}
	before := r.streamLast()
	ops := r.as(auth.RoleOps)
	for body, want := range map[string]string{
		`{"query":""}`:    "empty query",
		`{"query":"   "}`: "empty query",
		`{"query":"` + strings.Repeat("a", MaxQueryChars+1) + `"}`: "at most",
		`{"query":"x","kind":"weird"}`:                             "kind",
		`{"query":"x","since":"yesterday"}`:                        "RFC 3339",
		`{"query":"x","limit":26}`:                                 "limit",
		`{"query":"x","order":"oldest"}`:                           "order",
		`{"query":"x","bogus":1}`:                                  "malformed",
		`not json`:                                                 "malformed",
		`{"query":"!!!"}`:                                          "no letter",
		`{"query":"x","since":2000,"until":1000}`:                  "until",
	} {
		_, err := ask(t, ops, body)
		if !bustest.IsCode(err, bus.CodeBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: %v, want a 400 saying %q", body, err, want)
		}
	}
	if after := r.streamLast(); after != before {
		t.Fatalf("bad requests wrote to the transcript stream: last %d -> %d", before, after)
	}
}

// The ops role may publish a search request with any reply subject; the
// indexer, answering with a worker's rights, must not publish its answer
// onto a transcript subject (the stream would store it).
func TestReplyToStreamSubjectDropped(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:a", "the quokka parliament met")
	in := r.start(Options{})
	defer in.Close()
	s := r.serve(in)
	defer s.Stop()
	r.caughtUp(in)
	target := r.names.Transcript(bus.EncodeKey("agent:main:forged"))
	ops := r.as(auth.RoleOps)
	if err := ops.PublishMsg(&nats.Msg{Subject: r.names.Search(), Reply: target, Data: []byte(`{"query":"quokka"}`)}); err != nil {
		t.Fatal(err)
	}
	// a request after it on the same subscription: answered, so the first
	// was handled (dropped) before
	if _, err := ask(t, ops, `{"query":"quokka"}`); err != nil {
		t.Fatal(err)
	}
	st, err := r.js.Stream(bustest.Context(t), r.names.TranscriptsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(bustest.Context(t), jetstream.WithSubjectFilter(target))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[target]; n != 0 {
		t.Fatalf("the answer was stored on %s (%d messages)", target, n)
	}
}

// Two indexers answer in one queue group; while one restarts, the other
// answers every search.
func TestTwoIndexersServeWhileOneRestarts(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:a", "the narwhal treaty")
	pathA, pathB := filepath.Join(r.dir, "a.db"), filepath.Join(r.dir, "b.db")
	a := r.start(Options{Path: pathA})
	b := r.start(Options{Path: pathB})
	defer b.Close()
	sa, sb := r.serve(a), r.serve(b)
	defer sb.Stop()
	r.caughtUp(a)
	r.caughtUp(b)
	ops := r.as(auth.RoleOps)
	check := func(when string) {
		t.Helper()
		for range 10 {
			res, err := Ask(bustest.Context(t), ops, r.names, &Query{Text: "narwhal treaty"})
			if err != nil || len(res.Results) != 1 {
				t.Fatalf("%s: %+v %v", when, res, err)
			}
		}
	}
	check("both up")
	sa.Stop()
	a.Close()
	r.session("agent:main:b", "a second narwhal")
	check("one down")
	a = r.start(Options{Path: pathA})
	defer a.Close()
	sa = r.serve(a)
	defer sa.Stop()
	check("one restarted")
	r.caughtUp(a)
	if n := len(r.find(a, "second narwhal")); n != 1 {
		t.Fatalf("the restarted indexer missed what was written while it was down: %d hits", n)
	}
}

// With no indexer running, Ask refuses with the 503 that says to start
// one, and a caller can tell that case from a busy or rebuilding index
// by nats.ErrNoResponders in the chain, not by the text.
func TestAskWithoutIndexer(t *testing.T) {
	r := newRig(t)
	_, err := Ask(bustest.Context(t), r.nc, r.names, &Query{Text: "anything"})
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no indexer: %v, want an error matching nats.ErrNoResponders", err)
	}
	if !bustest.IsCode(err, bus.CodeUnavailable) || !strings.Contains(err.Error(), "sessionbus indexer") {
		t.Fatalf("no indexer: %v, want a 503 that says to start `sessionbus indexer`", err)
	}
}
