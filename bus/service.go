package bus

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Version is reported by the micro service.
const Version = "0.1.0"

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
}

// Service is the running micro service of one worker.
type Service struct {
	nc     *nats.Conn
	svc    micro.Service
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
	log    *slog.Logger
}

// Serve registers one micro endpoint per tool under <prefix>.tools.<tool>,
// plus a catch-all that answers 404 for tools nobody serves.
func Serve(nc *nats.Conn, tools map[string]Handler, o ServiceOptions) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1024
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "agent session tools over NATS",
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{nc: nc, svc: svc, ctx: ctx, cancel: cancel, sem: make(chan struct{}, o.MaxInFlight), log: o.Logger}
	grp := svc.AddGroup(o.Names.ToolsGroup())
	for name, h := range tools {
		if err := grp.AddEndpoint(name, s.wrap(name, h, o.Verifier)); err != nil {
			s.Stop()
			return nil, err
		}
	}
	// Own queue group: the catch-all sees every tool request (one member of
	// the group), and stays silent for known tools, which their own endpoint
	// answers.
	unknown := micro.HandlerFunc(func(r micro.Request) {
		tool := strings.TrimPrefix(r.Subject(), o.Names.ToolsGroup()+".")
		if _, ok := tools[tool]; ok {
			return
		}
		respondError(r, Errorf(CodeNotFound, "unknown tool %q: known tools are %s", tool, strings.Join(sortedKeys(tools), ", ")))
	})
	if err := svc.AddEndpoint("unknown", unknown,
		micro.WithEndpointSubject(o.Names.ToolsGroup()+".>"),
		micro.WithEndpointQueueGroup("unknown")); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Service) wrap(name string, h Handler, v *Verifier) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		if len(r.Data()) > MaxRequestBytes {
			respondError(r, Errorf(CodeTooLarge, "request body is %d bytes; the limit is %d bytes (1 MiB)", len(r.Data()), MaxRequestBytes))
			return
		}
		caller, err := v.Verify(r.Headers().Get(HeaderToken))
		if err != nil {
			e, _ := AsError(err)
			respondError(r, e)
			return
		}
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			respondError(r, Errorf(CodeUnavailable, "worker is stopping; retry"))
			return
		}
		// The reply goes out on the connection, not through r: micro reads the
		// request's error state once the handler returns, which would race
		// with a goroutine answering later.
		reply := r.Reply()
		s.wg.Add(1)
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			req := &Request{Tool: name, Caller: caller, Body: r.Data(), Header: nats.Header(r.Headers())}
			res, err := h.Handle(s.ctx, req)
			if err != nil {
				e, ok := AsError(err)
				if !ok {
					s.log.Error("tool failed", "tool", name, "caller", caller.SessionKey, "err", err)
					e = Errorf(CodeInternal, "internal error in %s; see worker logs", name)
				}
				s.send(reply, errorMsg(e))
				return
			}
			data, err := encodeReply(res)
			if err != nil {
				s.log.Error("encode reply", "tool", name, "err", err)
				s.send(reply, errorMsg(Errorf(CodeInternal, "internal error encoding %s reply", name)))
				return
			}
			s.send(reply, &nats.Msg{Data: data})
		}()
	})
}

// encodeReply passes already-encoded results through: a tool that had to
// measure its encoded size (sessions_list's 64 KiB budget) should not pay
// for a second encoding.
func encodeReply(res any) ([]byte, error) {
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(res)
}

func (s *Service) send(reply string, m *nats.Msg) {
	if reply == "" {
		return
	}
	m.Subject = reply
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("respond", "subject", reply, "err", err)
	}
}

// errorMsg carries a thrown error the way micro's Request.Error does.
func errorMsg(e *Error) *nats.Msg {
	body, _ := json.Marshal(e)
	return &nats.Msg{
		Header: nats.Header{HeaderServiceErr: []string{e.Message}, HeaderServiceCode: []string{strconv.Itoa(e.Code)}},
		Data:   body,
	}
}

func respondError(r micro.Request, e *Error) {
	body, _ := json.Marshal(e)
	_ = r.Error(strconv.Itoa(e.Code), e.Message, body)
}

// Stop drains in-flight handlers and removes the service.
func (s *Service) Stop() {
	s.cancel()
	_ = s.svc.Stop()
	s.wg.Wait()
}

func sortedKeys(m map[string]Handler) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
