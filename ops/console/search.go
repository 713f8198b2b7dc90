package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/ops/search"
)

// The search page: a phrase asked of the transcript search's indexers on
// <prefix>.ops.search (as `sessionbus search` asks it), one page of hits
// with the index's freshness. Only credentials logins search: admin and
// ops, the roles the bus lets publish that subject. A token login sees
// what its session's tools see, and no tool searches every transcript.

// searchTimeout bounds one search: the indexer gives a query 10 s in
// SQLite, and the answer's way back some more.
const searchTimeout = 15 * time.Second

// States of a search answer, for the page to say what happened.
const (
	searchReady      = "ready"
	searchBadQuery   = "bad-query"
	searchNoIndexer  = "no-indexer"
	searchRebuilding = "rebuilding"
	searchFailed     = "unavailable"
)

// searchRequest is what the page sends. Since and Until are RFC 3339 (the
// page turns its local times into UTC); empty is unbounded.
type searchRequest struct {
	Query  string `json:"query"`
	Agent  string `json:"agent,omitempty"`
	Since  string `json:"since,omitempty"`
	Until  string `json:"until,omitempty"`
	Order  string `json:"order,omitempty"`
	Offset int    `json:"offset,omitempty"`
}

// Part is a piece of a snippet: matched words (Mark) or the text between.
// The page makes each a text node (in a <mark> when Mark), so nothing in
// a transcript becomes markup.
type Part struct {
	Text string `json:"text"`
	Mark bool   `json:"mark,omitempty"`
}

// SearchHit is one hit as the page shows it.
type SearchHit struct {
	SessionKey string `json:"sessionKey"`
	Role       string `json:"role"`
	Timestamp  int64  `json:"timestamp"`
	Seq        uint64 `json:"seq"`   // stream sequence: the message the page opens at
	Entry      uint64 `json:"entry"` // 1-based place in the transcript
	Parts      []Part `json:"parts"`
}

// SearchPage is the answer to the page: a state, and with "ready" a page
// of hits; the index's freshness whenever an indexer told it.
type SearchPage struct {
	State   string         `json:"state"`
	Results []SearchHit    `json:"results"`
	More    bool           `json:"more"`
	Offset  int            `json:"offset"`
	Limit   int            `json:"limit"`
	Index   *search.Status `json:"index,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// searcher lets in the logins that may search, on requests with the
// action header: a search costs the indexers (up to 10 s of SQLite
// each), and a page on another port of the same host is same-site, so
// the cookie alone would let it make a logged-in browser search.
func (s *Server) searcher(h http.HandlerFunc) http.Handler {
	return s.viewer(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(actionHeader) == "" {
			writeError(w, http.StatusForbidden, "missing the "+actionHeader+" header: searches come from the console's page")
			return
		}
		if u := userOf(r); u.Token != "" {
			writeError(w, http.StatusForbidden, u.Name+" logged in with a session's token: the transcript search reads every session, so it needs a credentials login (admin or ops)")
			return
		}
		h(w, r)
	})
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	var req searchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeSearch(w, http.StatusBadRequest, SearchPage{State: searchBadQuery, Error: "send a JSON body: {\"query\": TEXT, \"agent\", \"since\", \"until\" (RFC 3339), \"order\" (newest or rank), \"offset\"}"})
		return
	}
	q, err := req.query()
	if err != nil {
		writeSearch(w, http.StatusBadRequest, SearchPage{State: searchBadQuery, Error: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), searchTimeout)
	defer cancel()
	res, err := search.Ask(ctx, s.o.Conn, s.o.Names, q)
	if err != nil {
		code, page := s.searchRefusal(r.Context(), err)
		writeSearch(w, code, page)
		return
	}
	p := SearchPage{State: searchReady, Results: make([]SearchHit, 0, len(res.Results)), More: res.More, Offset: res.Offset, Limit: q.Limit, Index: &res.Index}
	for _, h := range res.Results {
		p.Results = append(p.Results, SearchHit{SessionKey: h.SessionKey, Role: h.Role, Timestamp: h.Timestamp, Seq: h.Seq, Entry: h.Entry, Parts: snippetParts(h.Snippet)})
	}
	writeSearch(w, http.StatusOK, p)
}

// query is the request as the index takes it, checked by the index's own
// rules, so a bad query is said before (and without) an indexer.
func (req searchRequest) query() (*search.Query, error) {
	q := search.Query{Text: req.Query, Agent: strings.TrimSpace(req.Agent), Order: req.Order, Offset: req.Offset, Limit: search.MaxResults}
	for _, t := range []struct {
		v   string
		raw *json.RawMessage
	}{{req.Since, &q.Since}, {req.Until, &q.Until}} {
		if v := strings.TrimSpace(t.v); v != "" {
			*t.raw, _ = json.Marshal(v)
		}
	}
	body, err := json.Marshal(&q)
	if err != nil {
		return nil, err
	}
	return search.Parse(body)
}

// searchRefusal is the answer to a search the indexers refused or did
// not answer: no indexer runs, the index is being rebuilt (with how far,
// asked of the indexer), the query was bad, or the indexer failed.
func (s *Server) searchRefusal(ctx context.Context, err error) (int, SearchPage) {
	if errors.Is(err, nats.ErrNoResponders) {
		return http.StatusServiceUnavailable, SearchPage{State: searchNoIndexer, Error: err.Error()}
	}
	e, ok := bus.AsError(err)
	if !ok {
		s.log.Warn("console: search failed", "err", err)
		return http.StatusBadGateway, SearchPage{State: searchFailed, Error: "the search failed: " + err.Error()}
	}
	switch e.Code {
	case bus.CodeBadRequest:
		return http.StatusBadRequest, SearchPage{State: searchBadQuery, Error: e.Message}
	case bus.CodeUnavailable:
		// a status request is answered while the index is rebuilt: it
		// says how far the rebuild is, where the refusal is only text
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if st, serr := search.Ask(sctx, s.o.Conn, s.o.Names, &search.Query{Status: true}); serr == nil && st.Index.State == search.StateRebuilding {
			return http.StatusServiceUnavailable, SearchPage{State: searchRebuilding, Index: &st.Index, Error: e.Message}
		}
	}
	code := e.Code
	if code < 400 || code > 599 {
		code = http.StatusBadGateway
	}
	return code, SearchPage{State: searchFailed, Error: e.Message}
}

func writeSearch(w http.ResponseWriter, code int, p SearchPage) {
	if p.Results == nil {
		p.Results = []SearchHit{}
	}
	writeJSON(w, code, p)
}

// snippetParts splits an index snippet at its marks. A transcript's own
// « or » can shift where a mark seems to be; the parts stay text either
// way.
func snippetParts(snippet string) []Part {
	var out []Part
	add := func(text string, mark bool) {
		if text != "" {
			out = append(out, Part{Text: text, Mark: mark})
		}
	}
	rest := snippet
	for {
		before, after, ok := strings.Cut(rest, search.MarkOpen)
		if !ok {
			add(rest, false)
			return out
		}
		marked, tail, closed := strings.Cut(after, search.MarkClose)
		if !closed {
			// an open mark with no close: the transcript's own «
			add(before+search.MarkOpen+after, false)
			return out
		}
		add(before, false)
		add(marked, true)
		rest = tail
	}
}
