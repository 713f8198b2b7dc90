package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
)

// ServiceName is the micro service of the indexers (`nats micro info
// sessionbus-search`); QueueGroup the queue group their endpoints share,
// so each request goes to one indexer.
const (
	ServiceName = "sessionbus-search"
	QueueGroup  = "sessionbus-search"
	// MaxRequestBytes bounds a search request (a query, filters and up to
	// MaxSessionKeys keys).
	MaxRequestBytes = 256 << 10
	// searchTimeout bounds one query's time in SQLite.
	searchTimeout = 10 * time.Second
	// maxConcurrent bounds the searches one indexer runs at once.
	maxConcurrent = 4
)

// Search answers q from the index with its freshness. While the index is
// being built the answer is a 503 that says how far it is; nothing is
// written either way.
func (in *Indexer) Search(ctx context.Context, q *Query) (*Result, error) {
	st := in.Status()
	if q.Status {
		return &Result{Results: []Hit{}, Index: st}, nil
	}
	switch st.State {
	case StateRebuilding:
		return nil, bus.Errorf(bus.CodeUnavailable, "the search index is being rebuilt: %d%% (stream sequence %d of %d); search again when it is done", st.Percent, st.Applied, st.Target)
	case StateStopped:
		return nil, bus.Errorf(bus.CodeUnavailable, "this search indexer stopped (%s): restart `sessionbus indexer`", st.Error)
	}
	if q.Archived {
		if err := in.syncArchives(ctx); err != nil {
			return nil, err
		}
	}
	hits, more, err := in.ix.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	return &Result{Results: hits, More: more, Offset: q.Offset, Order: q.Order, Index: st}, nil
}

// Service answers Names.Search for one indexer.
type Service struct {
	nc   *nats.Conn
	svc  micro.Service
	in   *Indexer
	sem  chan struct{}
	done chan struct{} // closed by Stop: a request still arriving is dropped
}

// Serve adds the indexer's endpoint to nc.
func Serve(nc *nats.Conn, in *Indexer) (*Service, error) {
	s := &Service{nc: nc, in: in, sem: make(chan struct{}, maxConcurrent), done: make(chan struct{})}
	svc, err := micro.AddService(nc, micro.Config{
		Name: ServiceName, Version: bus.Version, QueueGroup: QueueGroup,
		Description: "full-text search of every transcript",
	})
	if err != nil {
		return nil, fmt.Errorf("search: add service: %w", err)
	}
	if err := svc.AddEndpoint("search", micro.HandlerFunc(s.handle), micro.WithEndpointSubject(in.o.Names.Search())); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("search: add endpoint %s: %w", in.o.Names.Search(), err)
	}
	s.svc = svc
	return s, nil
}

// Stop ends the subscription; searches in flight finish first.
func (s *Service) Stop() {
	_ = s.svc.Stop()
	close(s.done)
	for range maxConcurrent {
		s.sem <- struct{}{}
	}
}

func (s *Service) handle(req micro.Request) {
	// The indexer answers with a worker's rights: a reply subject that is
	// no inbox could be a stream's (a transcript), which would store the
	// answer. Such a request is dropped.
	if !bus.IsInbox(req.Reply()) {
		s.in.log.Warn("search: request dropped: its reply subject is not an inbox", "reply", req.Reply())
		return
	}
	select {
	case s.sem <- struct{}{}:
	case <-s.done:
		return // stopping: the caller's timeout tells it to ask again
	}
	// The answer is published on the connection, not through req: micro
	// reads the request's error for its stats once this handler returns,
	// and a Respond or Error from this goroutine would race with that read.
	reply := req.Reply()
	body := req.Data()
	go func() {
		defer func() { <-s.sem }()
		res, err := s.answer(body)
		if err == nil {
			var b []byte
			if b, err = json.Marshal(res); err == nil {
				s.publish(&nats.Msg{Subject: reply, Data: b})
				return
			}
		}
		e, ok := bus.AsError(err)
		if !ok {
			e = &bus.Error{Code: bus.CodeInternal, Message: "search failed: " + err.Error()}
		}
		m := bus.ErrorMsg(e)
		m.Subject = reply
		s.publish(m)
	}()
}

func (s *Service) publish(m *nats.Msg) {
	if err := s.nc.PublishMsg(m); err != nil {
		s.in.log.Warn("search: answer not sent", "err", err)
	}
}

func (s *Service) answer(body []byte) (*Result, error) {
	if len(body) > MaxRequestBytes {
		return nil, bus.Errorf(bus.CodeTooLarge, "search request of %d bytes: at most %d", len(body), MaxRequestBytes)
	}
	q, err := Parse(body)
	if err != nil {
		return nil, bus.BadRequest(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), searchTimeout)
	defer cancel()
	return s.in.Search(ctx, q)
}

// noIndexer is Ask's refusal when no indexer runs: the 503 a caller
// shows, which also matches nats.ErrNoResponders, so a caller (the
// console) can tell "none runs" from a busy or rebuilding index without
// reading the text.
type noIndexer struct{ e *bus.Error }

func (n noIndexer) Error() string   { return n.e.Message }
func (n noIndexer) Unwrap() []error { return []error{n.e, nats.ErrNoResponders} }

// Ask sends q to the indexers of names's deployment and decodes the
// answer; a refusal is a *bus.Error (errors.As), and when no indexer
// runs it matches nats.ErrNoResponders too (errors.Is).
func Ask(ctx context.Context, nc *nats.Conn, names bus.Names, q *Query) (*Result, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	data, err := handlers.AskIndex(ctx, nc, names.Search(), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, noIndexer{bus.Errorf(bus.CodeUnavailable, "no search indexer answers on %s: start `sessionbus indexer` (or `serve`, which runs one)", names.Search())}
	case errors.Is(err, nats.ErrPermissionViolation), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		// The server drops a publish the credentials may not make and says
		// so only asynchronously: a search that gets no answer at all is
		// most often one.
		return nil, bus.Errorf(bus.CodeUnavailable, "no answer from %s (%v): only the ops or admin credentials may search; with those, an indexer may be overloaded", names.Search(), err)
	case err != nil:
		if _, ok := bus.AsError(err); ok {
			return nil, err // the indexer's refusal
		}
		return nil, fmt.Errorf("search %s: %w", names.Search(), err)
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("search: undecodable answer: %w", err)
	}
	return &res, nil
}
