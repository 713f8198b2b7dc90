package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// searchAskTimeout bounds one sessions_search request to the indexers:
// their own bound on a query is 10 s.
const searchAskTimeout = 12 * time.Second

// searchRequest is the body of <prefix>.ops.search that sessions_search
// sends (ops/search.Query's fields it uses; the indexer refuses unknown
// ones, so a name wrong here fails every call and its tests).
type searchRequest struct {
	Query       string   `json:"query"`
	Limit       int      `json:"limit,omitempty"`
	Offset      int      `json:"offset,omitempty"`
	SessionKeys []string `json:"sessionKeys,omitempty"`
	Agents      []string `json:"agents,omitempty"`
}

// searchAnswer is what the tool reads of the indexer's answer
// (ops/search.Result).
type searchAnswer struct {
	Results []struct {
		SessionKey string `json:"sessionKey"`
		Entry      uint64 `json:"entry"`
		Role       string `json:"role"`
		Timestamp  int64  `json:"timestamp"`
		Snippet    string `json:"snippet"`
	} `json:"results"`
	More  bool `json:"more"`
	Index struct {
		Lag uint64 `json:"lag"`
	} `json:"index"`
}

// AskIndex sends one request to the transcript search's indexers on
// subject and returns the answer's body. A refusal the indexer answers
// (400, the 503 of a rebuild with its progress) is a *bus.Error as it
// sent it; a transport failure (nats.ErrNoResponders, a timeout) is
// returned as is, for the caller to say what it means to its own user.
func AskIndex(ctx context.Context, nc *nats.Conn, subject string, body []byte) ([]byte, error) {
	reply, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return nil, err
	}
	if desc := reply.Header.Get(bus.HeaderServiceErr); desc != "" {
		code, _ := strconv.Atoi(reply.Header.Get(bus.HeaderServiceCode))
		if code == 0 {
			code = bus.CodeInternal
		}
		return nil, &bus.Error{Code: code, Message: desc}
	}
	return reply.Data, nil
}

// askSearch asks the indexers with the worker's connection; every failure
// is a 503 that says what an operator or the caller can do.
func (d *Deps) askSearch(ctx context.Context, q searchRequest) (*searchAnswer, error) {
	subject := d.Names.Search()
	if d.searchConn == nil {
		return nil, bus.Errorf(bus.CodeUnavailable, "sessions_search is unavailable: this worker has no connection to the transcript search")
	}
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, searchAskTimeout)
	defer cancel()
	data, err := AskIndex(ctx, d.searchConn, subject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, bus.Errorf(bus.CodeUnavailable, "sessions_search is unavailable: the transcript search index is not running (no indexer answers on %s); an operator must run one: `sessionbus indexer`, or `sessionbus serve`, which runs one", subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, bus.Errorf(bus.CodeUnavailable, "sessions_search: the transcript search index did not answer within %s; it may be overloaded: try again", searchAskTimeout)
	case err != nil:
		if _, ok := bus.AsError(err); ok {
			return nil, err // the indexer's own refusal: a rebuild's progress, say
		}
		return nil, fmt.Errorf("sessions_search: ask %s: %w", subject, err)
	}
	var ans searchAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("sessions_search: undecodable answer from %s: %w", subject, err)
	}
	return &ans, nil
}
