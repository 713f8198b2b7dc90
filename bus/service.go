package bus

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/client/schema"
)

// Version is sessionbus's release, reported by the micro service and the
// session_status card. A var, so a release build can stamp it:
// -ldflags "-X github.com/sessionbus/sessionbus/bus.Version=1.2.3".
var Version = "0.1.0"

// description is the service description `nats micro info` shows.
const description = "agent session tools over NATS"

// queueGroup is the queue group every worker's tool subscription joins, so
// each request goes to one worker.
const queueGroup = micro.DefaultQueueGroup

// DefaultShutdownGrace is how long Stop lets in-flight requests finish
// before it ends the ones still waiting.
const DefaultShutdownGrace = 10 * time.Second

// ErrStopping is the cause of a handler context ended because the service
// stops and its shutdown grace is over. A handler that was only waiting
// (for a run's outcome, say) answers what it knows then instead of failing;
// see Stopping.
var ErrStopping = errors.New("worker is stopping")

// Stopping reports whether ctx ended because the service stopped: the
// handler's wait was cut short by shutdown, not by its own deadline.
func Stopping(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrStopping)
}

// Request is one tool call after the transport checks: size, identity.
type Request struct {
	Tool   string
	Caller Caller
	Body   []byte
	Header nats.Header
}

// Handler answers one tool. A returned *Error becomes a thrown error reply
// with its code; any other error is logged and answered as a bare 500.
type Handler interface {
	Handle(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to Handler (the net/http shape).
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// ServiceOptions configure the tool service.
type ServiceOptions struct {
	Names    Names
	Verifier *Verifier
	Logger   *slog.Logger
	// MaxInFlight bounds concurrent handler goroutines per worker; a tool
	// such as sessions_send waits for seconds, so handlers must not run on
	// the subscription goroutine.
	MaxInFlight int
	// Inbound, when set, answers Names.Inbound(): channel adapters bringing
	// human turns in. It shares the tools' queue group, size limit and
	// shutdown, but takes only adapter tokens, as the tools take only
	// session tokens. It is no tool: `nats micro info|stats` list the tools
	// only, one endpoint each.
	Inbound Handler
	// Schema, when set, answers Names.Schema(): the tool schemas in OpenAI
	// function-calling format, filtered by the caller's tool policy. It
	// takes session tokens, as the tools do, and is no tool either.
	Schema Handler
	// Ops, when set, answers Names.SessionOp(name) for each name (session
	// lifecycle operations: delete, reset). Like Inbound they take only
	// adapter tokens (ops mint one for '*'); the handler checks the
	// channel.
	Ops map[string]Handler
	// CronOps, when set, answers Names.CronOp(name) for each name (the
	// cron job operations), under the same rules as Ops.
	CronOps map[string]Handler
	// Observer, when set, is told of every answered request as the micro
	// stats count it (metrics); nil observes nothing.
	Observer ToolObserver
	// Quota, when set, is asked about every request under a session token
	// (tools, schema) once the token is verified, before the request takes
	// a handler slot: a refusal (a 429) is answered from the subscription,
	// at once or after its Error.Hold, so a caller over its limit costs a
	// worker a token check and no handler. MaxHeldReplies bounds the held
	// ones (0: DefaultMaxHeldReplies).
	Quota          func(c Caller) *Error
	MaxHeldReplies int
	// ReplyPrefixes are the subject prefixes a reply may be sent to;
	// empty means DefaultReplyPrefixes. See Service.replyAllowed.
	ReplyPrefixes []string
}

// DefaultReplyPrefixes is where requesters' inboxes live: nats.go's and the
// nats CLI's default inbox, and the per-user inbox _INBOX.<user> that
// operator-mode credentials restrict a caller to.
var DefaultReplyPrefixes = []string{"_INBOX."}

// ToolObserver is told of each request the service answers: its endpoint,
// the time until its reply was sent and its thrown error code ("" when it
// succeeded). It runs on the answering goroutine, so it must be quick.
type ToolObserver interface {
	ToolDone(tool string, took time.Duration, code string)
	// ReplyRefused is told of a request dropped unanswered because its
	// reply subject was not an inbox (endpoint is "" for an unknown tool
	// or a monitoring verb).
	ReplyRefused(endpoint string)
}

// InboundEndpoint names the inbound endpoint (Request.Tool of its calls).
const InboundEndpoint = "inbound"

// SchemaEndpoint names the schema endpoint (Request.Tool of its calls).
const SchemaEndpoint = "schema"

// Service is the running tool service of one worker: one queue
// subscription for every tool request, and the micro monitoring subjects
// ($SRV.PING, $SRV.INFO, $SRV.STATS) answered with per-tool endpoints.
//
// It does not use micro's own service: micro counts a request, its error
// and its processing time when the endpoint handler returns, and our
// handlers answer later from their own goroutine, so micro reported no
// thrown errors and only the synchronous part of the latency. It also needs
// one subscription per endpoint, and answering the unknown tools took a
// catch-all that received every request a second time.
type Service struct {
	nc      *nats.Conn
	names   Names
	verify  *Verifier
	log     *slog.Logger
	id      string
	started time.Time

	tools    map[string]*endpoint
	inbound  *endpoint           // nil unless ServiceOptions.Inbound
	schema   *endpoint           // nil unless ServiceOptions.Schema
	observer ToolObserver        // nil unless ServiceOptions.Observer
	quota    func(Caller) *Error // nil unless ServiceOptions.Quota
	// replyPrefixes are ServiceOptions.ReplyPrefixes; refused counts the
	// requests dropped for a reply subject outside them.
	replyPrefixes []string
	refused       atomic.Int64
	held          heldReplies // 429s held (refuseOverQuota)
	known         string      // the sorted tool names, for the 404 text
	// subs take requests (tools, then inbound); subsDone[i] is closed when
	// subs[i] delivers no more
	subs     []*nats.Subscription
	subsDone []chan struct{}
	verbs    []*nats.Subscription

	// ctx is every handler's context: it ends, with cause ErrStopping, once
	// Stop's grace is over.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	sem    chan struct{}
	once   sync.Once

	mu sync.Mutex // guards the endpoints' stats
}

// endpoint is one tool and its counters.
type endpoint struct {
	name, subject string
	h             Handler
	metadata      map[string]string // the tool's schemas, for INFO
	requests      int
	errors        int
	lastError     string
	processing    time.Duration
}

// Serve answers the tools on <prefix>.tools.<tool>, one queue subscription
// of <prefix>.tools.> dispatching by tool name, so each request is
// delivered to a worker once; a tool nobody serves gets a 404 that names
// the known ones.
func Serve(nc *nats.Conn, tools map[string]Handler, o ServiceOptions) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1024
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Service{
		nc: nc, names: o.Names, verify: o.Verifier, log: o.Logger,
		id: rand.Text(), started: time.Now().UTC(),
		tools: make(map[string]*endpoint, len(tools)), known: strings.Join(slices.Sorted(maps.Keys(tools)), ", "),
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, o.MaxInFlight), observer: o.Observer,
		replyPrefixes: o.ReplyPrefixes, quota: o.Quota,
	}
	if len(s.replyPrefixes) == 0 {
		s.replyPrefixes = DefaultReplyPrefixes
	}
	s.held.max = cmp.Or(o.MaxHeldReplies, DefaultMaxHeldReplies)
	for name, h := range tools {
		s.tools[name] = &endpoint{name: name, subject: o.Names.Tool(name), h: h, metadata: schema.Metadata(name)}
	}
	if err := s.subscribe(o.Names.ToolsGroup()+".>", s.onRequest); err != nil {
		cancel(nil)
		return nil, err
	}
	if o.Inbound != nil {
		s.inbound = &endpoint{name: InboundEndpoint, subject: o.Names.Inbound(), h: o.Inbound}
		if err := s.subscribe(s.inbound.subject, s.onInbound); err != nil {
			s.Stop()
			return nil, err
		}
	}
	for name, h := range o.Ops {
		ep := &endpoint{name: "session." + name, subject: o.Names.SessionOp(name), h: h}
		if err := s.subscribe(ep.subject, func(m *nats.Msg) { s.dispatch(ep, m, time.Now(), true) }); err != nil {
			s.Stop()
			return nil, err
		}
	}
	for name, h := range o.CronOps {
		ep := &endpoint{name: "cron." + name, subject: o.Names.CronOp(name), h: h}
		if err := s.subscribe(ep.subject, func(m *nats.Msg) { s.dispatch(ep, m, time.Now(), true) }); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if o.Schema != nil {
		s.schema = &endpoint{name: SchemaEndpoint, subject: o.Names.Schema(), h: o.Schema}
		if err := s.subscribe(s.schema.subject, func(m *nats.Msg) { s.dispatch(s.schema, m, time.Now(), false) }); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := s.subscribeVerbs(); err != nil {
		s.Stop()
		return nil, err
	}
	// One round trip, so the server holds the subscriptions when Serve
	// returns: a caller told the worker is ready must not get "no
	// responders".
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("register the tool subscriptions: %w", err)
	}
	return s, nil
}

// subscribe joins the workers' queue group on subject.
func (s *Service) subscribe(subject string, cb nats.MsgHandler) error {
	sub, err := s.nc.QueueSubscribe(subject, queueGroup, cb)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	sub.SetClosedHandler(func(string) { close(done) })
	s.subs, s.subsDone = append(s.subs, sub), append(s.subsDone, done)
	return nil
}

// onRequest runs on the subscription goroutine: it does the cheap checks
// and hands the call to a handler goroutine.
func (s *Service) onRequest(m *nats.Msg) {
	start := time.Now()
	name := strings.TrimPrefix(m.Subject, s.names.ToolsGroup()+".")
	ep, ok := s.tools[name]
	if !s.replyAllowed(m.Reply) {
		s.refuseReply(ep, start, m)
		return
	}
	if !ok {
		// no endpoint to count it on: it is not one of this service's
		s.send(m.Reply, ErrorMsg(Errorf(CodeNotFound, "unknown tool %q: known tools are %s", name, s.known)))
		return
	}
	s.dispatch(ep, m, start, false)
}

// onInbound is onRequest for the inbound endpoint.
func (s *Service) onInbound(m *nats.Msg) { s.dispatch(s.inbound, m, time.Now(), true) }

// dispatch checks size, token (an adapter's on the inbound endpoint, a
// session's on a tool) and the session's quota, and hands the call to a
// handler goroutine.
func (s *Service) dispatch(ep *endpoint, m *nats.Msg, start time.Time, adapter bool) {
	if !s.replyAllowed(m.Reply) {
		s.refuseReply(ep, start, m)
		return
	}
	if len(m.Data) > MaxRequestBytes {
		s.finish(ep, start, m.Reply, ErrorMsg(Errorf(CodeTooLarge, "request body is %d bytes; the limit is %d bytes (1 MiB)", len(m.Data), MaxRequestBytes)))
		return
	}
	caller, err := s.verify.Verify(m.Header.Get(HeaderToken))
	if err != nil {
		e, ok := AsError(err)
		if !ok {
			e = Errorf(CodeUnauthorized, "invalid %s header: %v; mint a token with `sessionbus token --as SESSIONKEY`", HeaderToken, err)
		}
		s.finish(ep, start, m.Reply, ErrorMsg(e))
		return
	}
	switch {
	case adapter && caller.Adapter == "":
		s.finish(ep, start, m.Reply, ErrorMsg(Errorf(CodeForbidden,
			"%s takes a channel adapter's token, and this one is session %s's: an agent cannot speak as a human; mint an adapter token with `sessionbus token --adapter CHANNEL`",
			ep.subject, caller.SessionKey)))
		return
	case !adapter && caller.Adapter != "":
		s.finish(ep, start, m.Reply, ErrorMsg(Errorf(CodeForbidden,
			"this is channel adapter %q's token: it brings human turns in on %s and calls no tool; mint a session token with `sessionbus token --as SESSIONKEY`",
			caller.Adapter, s.names.Inbound())))
		return
	}
	if s.quota != nil && !adapter {
		if e := s.quota(caller); e != nil {
			s.refuseOverQuota(ep, start, m.Reply, e)
			return
		}
	}
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		s.finish(ep, start, m.Reply, ErrorMsg(Errorf(CodeUnavailable, "worker is stopping; retry")))
		return
	}
	// Stop waits for this goroutine: the Add happens in the subscription
	// callback, and Stop waits only after the subscription delivered its
	// last message and its callback returned.
	s.wg.Add(1)
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		req := &Request{Tool: ep.name, Caller: caller, Body: m.Data, Header: m.Header}
		msg, release := s.handle(ep, req)
		s.finish(ep, start, m.Reply, msg)
		if release != nil {
			release() // published: the connection holds its own copy
		}
	}()
}

// Lent is a result whose bytes the handler only lends to the service: the
// service publishes Data as the reply and then calls Release, after which
// the handler reuses the buffer. Publishing copies the bytes into the
// connection's buffer, so a large reply such as sessions_list's 30 KiB
// page reuses one pooled buffer instead of allocating one per call; on a
// worker holding a large session index that means fewer garbage
// collections, each of which marks the whole index. Release is called
// once, after the reply is sent.
type Lent struct {
	Data    json.RawMessage
	Release func()
}

// handle runs the tool and builds its reply; release, when not nil, is
// called once the reply is sent.
func (s *Service) handle(ep *endpoint, req *Request) (_ *nats.Msg, release func()) {
	res, err := ep.h.Handle(s.ctx, req)
	if lent, ok := res.(*Lent); ok && err == nil {
		return &nats.Msg{Data: lent.Data}, lent.Release
	}
	if err != nil {
		e, ok := AsError(err)
		switch {
		case ok:
		case Stopping(s.ctx):
			// cut short by the shutdown, not broken: another worker can
			// answer it
			e = Errorf(CodeUnavailable, "worker is stopping; retry")
		default:
			s.log.Error("tool failed", "tool", ep.name, "caller", req.Caller.SessionKey, "err", err)
			e = Errorf(CodeInternal, "internal error in %s; see worker logs", ep.name)
		}
		return ErrorMsg(e), nil
	}
	data, err := encodeReply(res)
	if err != nil {
		s.log.Error("encode reply", "tool", ep.name, "err", err)
		return ErrorMsg(Errorf(CodeInternal, "internal error encoding %s reply", ep.name)), nil
	}
	return &nats.Msg{Data: data}, nil
}

// finish sends the reply and counts the request on its endpoint, with the
// time from its arrival until the reply was sent; a reply carrying a
// thrown error counts as an error, as micro counts one.
func (s *Service) finish(ep *endpoint, start time.Time, reply string, m *nats.Msg) {
	s.send(reply, m)
	took := time.Since(start)
	code := m.Header.Get(HeaderServiceCode)
	s.mu.Lock()
	ep.requests++
	ep.processing += took
	if code != "" {
		ep.errors++
		ep.lastError = code + ":" + m.Header.Get(HeaderServiceErr)
	}
	s.mu.Unlock()
	// after the micro stats: a request the observer counted is in them too
	if s.observer != nil {
		s.observer.ToolDone(ep.name, took, code)
	}
}

// replyAllowed reports whether the service may answer on reply: a
// requester's inbox. The worker's connection may write anywhere in the
// deployment (buckets, streams, deliveries), and a request's reply subject
// is whatever its sender wrote, so answering any subject would let a caller
// with the narrowest credentials write a reply into a session entry, a run
// record or the run queue with the worker's rights. A request with no
// reply subject is answered nowhere and stays allowed.
func (s *Service) replyAllowed(reply string) bool {
	return reply == "" || IsInbox(reply, s.replyPrefixes...)
}

// IsInbox reports whether subject is a requester's inbox: under one of
// prefixes (DefaultReplyPrefixes when none), with no wildcard token, which
// would fan what is sent there out to every inbox that matches it. What a
// deployment's processes send to such a subject reaches the requester and
// no stream.
func IsInbox(subject string, prefixes ...string) bool {
	if len(prefixes) == 0 {
		prefixes = DefaultReplyPrefixes
	}
	for _, p := range prefixes {
		if len(subject) > len(p) && strings.HasPrefix(subject, p) {
			for tok := range strings.SplitSeq(subject, ".") {
				if tok == "*" || tok == ">" || tok == "" {
					return false
				}
			}
			return true
		}
	}
	return false
}

// refuseReply drops a request whose reply subject is not an inbox: the
// handler never runs and nothing is published. It is counted (RefusedReplies,
// the observer, and as a 403 on its endpoint's micro stats) and logged, so an
// operator sees the attempt; the sender gets no answer, as there is nowhere
// safe to send one.
func (s *Service) refuseReply(ep *endpoint, start time.Time, m *nats.Msg) {
	s.refused.Add(1)
	name := ""
	if ep != nil {
		name = ep.name
	}
	s.log.Warn("refused a request whose reply subject is not an inbox", "subject", m.Subject, "reply", m.Reply)
	if ep != nil {
		took := time.Since(start)
		s.mu.Lock()
		ep.requests++
		ep.errors++
		ep.processing += took
		ep.lastError = strconv.Itoa(CodeForbidden) + ":reply subject " + m.Reply + " is not an inbox"
		s.mu.Unlock()
		if s.observer != nil {
			s.observer.ToolDone(ep.name, took, strconv.Itoa(CodeForbidden))
		}
	}
	if s.observer != nil {
		s.observer.ReplyRefused(name)
	}
}

// RefusedReplies is how many requests were dropped because their reply
// subject was not an inbox.
func (s *Service) RefusedReplies() int64 { return s.refused.Load() }

// subscribeVerbs answers the micro monitoring subjects, for all services,
// for this service's name and for this instance, as micro does.
func (s *Service) subscribeVerbs() error {
	for _, v := range []micro.Verb{micro.PingVerb, micro.InfoVerb, micro.StatsVerb} {
		for _, subj := range []string{
			micro.APIPrefix + "." + v.String(),
			micro.APIPrefix + "." + v.String() + "." + ServiceName,
			micro.APIPrefix + "." + v.String() + "." + ServiceName + "." + s.id,
		} {
			sub, err := s.nc.Subscribe(subj, func(m *nats.Msg) {
				if !s.replyAllowed(m.Reply) {
					s.refuseReply(nil, time.Now(), m)
					return
				}
				var res any
				switch v {
				case micro.PingVerb:
					res = micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType}
				case micro.InfoVerb:
					res = s.Info()
				default:
					res = s.Stats()
				}
				data, _ := json.Marshal(res)
				if err := m.Respond(data); err != nil {
					s.log.Debug("answer "+subj, "err", err)
				}
			})
			if err != nil {
				return err
			}
			s.verbs = append(s.verbs, sub)
		}
	}
	return nil
}

func (s *Service) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: ServiceName, ID: s.id, Version: Version, Metadata: map[string]string{}}
}

// sortedEndpoints is the endpoints by tool name.
func (s *Service) sortedEndpoints() []*endpoint {
	out := slices.Collect(maps.Values(s.tools))
	slices.SortFunc(out, func(a, b *endpoint) int { return strings.Compare(a.name, b.name) })
	return out
}

// Info is what `nats micro info sessionbus` shows: one endpoint per tool.
func (s *Service) Info() micro.Info {
	info := micro.Info{ServiceIdentity: s.identity(), Type: micro.InfoResponseType, Description: description, Endpoints: []micro.EndpointInfo{}}
	for _, ep := range s.sortedEndpoints() {
		info.Endpoints = append(info.Endpoints, micro.EndpointInfo{Name: ep.name, Subject: ep.subject, QueueGroup: queueGroup, Metadata: ep.metadata})
	}
	return info
}

// Stats is what `nats micro stats sessionbus` shows: per tool, the requests
// answered, the thrown errors among them and the time until each reply.
func (s *Service) Stats() micro.Stats {
	st := micro.Stats{ServiceIdentity: s.identity(), Type: micro.StatsResponseType, Started: s.started, Endpoints: []*micro.EndpointStats{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ep := range s.sortedEndpoints() {
		e := &micro.EndpointStats{
			Name: ep.name, Subject: ep.subject, QueueGroup: queueGroup,
			NumRequests: ep.requests, NumErrors: ep.errors, LastError: ep.lastError,
			ProcessingTime: ep.processing,
		}
		if ep.requests > 0 {
			e.AverageProcessingTime = ep.processing / time.Duration(ep.requests)
		}
		st.Endpoints = append(st.Endpoints, e)
	}
	return st
}

// Stop is Shutdown with DefaultShutdownGrace.
func (s *Service) Stop() { s.Shutdown(DefaultShutdownGrace) }

// Shutdown drains first: it stops taking requests, answers every request
// already delivered, and lets in-flight handlers finish. Handlers still
// running after grace see their context end with cause ErrStopping (a
// waiting sessions_send then answers as on its soft timeout; a handler
// that fails on it is answered 503), and requests still queued for a
// handler slot get a 503. It returns when every reply is on the server.
func (s *Service) Shutdown(grace time.Duration) {
	s.once.Do(func() {
		cut := time.AfterFunc(grace, func() { s.cancel(ErrStopping) })
		defer cut.Stop()
		for _, v := range s.verbs {
			_ = v.Unsubscribe()
		}
		for _, sub := range s.subs {
			if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				s.log.Warn("drain requests", "subject", sub.Subject, "err", err)
				_ = sub.Unsubscribe()
			}
		}
		for _, done := range s.subsDone {
			<-done
		}
		s.sendHeld() // a held 429 is sent now, not when its hold is over
		s.wg.Wait()
		s.cancel(ErrStopping)
		if err := s.nc.FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Warn("flush replies", "err", err)
		}
	})
}
