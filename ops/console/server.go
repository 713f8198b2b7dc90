// Package console is the web console: a small HTTP server, bound to
// loopback by default, that shows a deployment's sessions, sub-agent trees,
// transcripts, live turns and health in a browser, and lets an admin kill
// or steer sub-agents and chat into sessions. It is a bus client like any
// other: it reads the buckets and streams over NATS, calls the tools with
// caller tokens it mints, and never opens a store file. Its assets are
// embedded, so the binary alone serves it and nothing is fetched at run
// time.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

//go:embed web
var webFS embed.FS

// DefaultListen is where `serve --demo` puts the console.
const DefaultListen = "127.0.0.1:4280"

// Channel is the channel the console's chat speaks on: OpenClaw's
// internal one, which does not move a session's delivery route.
const Channel = handlers.InternalChannel

// Options configure a console.
type Options struct {
	// Conn is the console's own connection: an admin's (it reads buckets,
	// appends to the signal log and calls tools).
	Conn *nats.Conn
	// Operator signs the caller and adapter tokens the console calls with.
	Operator *bus.Operator
	Names    bus.Names
	// Listen is the HTTP address (host:port; port 0 picks one).
	Listen string
	// Auth says the bus requires credentials: the console then requires a
	// login. Without it the console refuses any address but loopback and
	// lets every local browser in as admin, as the bus lets every local
	// process in.
	Auth bool
	// Account is the NATS account public key whose users may log in with
	// their credentials file (the account the console's own user is in).
	Account string
	// StuckAfter is passed to the ops report (0: its default).
	StuckAfter time.Duration
	// Redactor masks secrets in the sessions page's previews (nil: the
	// default patterns, as logging.redactSensitive "tools" masks them).
	Redactor *sanitize.Redactor
	// MetricsFrom are the /metrics addresses (host:port or URLs) of the
	// workers and gateways whose figures the ops page charts.
	MetricsFrom []string
	// AgentModel is the model an agent's turns use by the deployment's
	// config ("provider/model"; nil or "": unknown), for the sessions'
	// model column and card.
	AgentModel func(agentID string) string
	// Price is a model's catalog price in USD per million tokens (nil, or
	// a model it does not price: the board shows no cost), as the status
	// card prices a session's counters.
	Price func(model string) config.ModelCost
	Log   *slog.Logger
	// Now is the clock of the login back-off (nil: time.Now).
	Now func() time.Time
}

// Server is a running console.
type Server struct {
	o        Options
	log      *slog.Logger
	js       jetstream.JetStream
	store    *sessions.Store
	index    *sessions.Index
	children *subagents.Index
	registry *subagents.Registry
	signals  *signals.Log
	tr       *transcripts.Store
	runs     *runTable
	last     *lastTable
	redactor *sanitize.Redactor
	charts   *charts
	hub      *hub
	live     *liveBuffer
	logins   *logins
	throttle *loginThrottle
	verifier *bus.Verifier

	ln   net.Listener
	http *http.Server
	// done ends the event streams on Close, which would otherwise keep
	// the HTTP server's shutdown waiting for open pages
	done      chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// ErrNotLoopback is returned for a non-loopback address on a bus without auth.
var ErrNotLoopback = errors.New("console: the bus runs without auth (serve --insecure), so the console would let anyone who reaches it read and change every session: give a loopback --listen such as 127.0.0.1:4280, or run the bus with auth (the default)")

// Start checks the options, opens what the console reads and serves HTTP
// until Close.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Conn == nil {
		return nil, errors.New("console: no NATS connection")
	}
	if o.Operator == nil {
		return nil, errors.New("console: it mints caller tokens for the tools, so it needs the admin role's credentials with the token key (DATA/operator.creds, which serve writes): pass them with --creds")
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if !o.Auth && !IsLoopback(o.Listen) {
		return nil, ErrNotLoopback
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return nil, err
	}
	s := &Server{o: o, log: o.Log, js: js, hub: newHub(), throttle: newLoginThrottle(), verifier: bus.NewVerifier(o.Operator.PublicKey()), done: make(chan struct{})}
	if err := s.open(ctx); err != nil {
		s.stopStores()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		s.stopStores()
		return nil, fmt.Errorf("console: listen on %s: %w (give another --listen)", o.Listen, err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("console: http server stopped", "err", err)
		}
	}()
	return s, nil
}

// open opens the stores the console reads, their in-memory indexes, and
// the watches that tell browsers what changed.
func (s *Server) open(ctx context.Context) error {
	names := s.o.Names
	store, err := sessions.Open(ctx, s.js, names)
	if err != nil {
		return fmt.Errorf("console: open the sessions bucket: %w (the console needs the admin role's credentials)", err)
	}
	s.store = store
	if s.logins, err = openLogins(ctx, s.js, names, s.now, s.log); err != nil {
		return fmt.Errorf("console: open the logins bucket: %w", err)
	}
	if s.index, err = sessions.StartIndex(ctx, s.js, store, s.log, nil); err != nil {
		return fmt.Errorf("console: index sessions: %w", err)
	}
	if s.registry, err = subagents.Open(ctx, s.js, names); err != nil {
		return fmt.Errorf("console: open the sub-agent registry: %w", err)
	}
	if s.children, err = subagents.StartIndex(ctx, s.registry, s.log); err != nil {
		return fmt.Errorf("console: index sub-agents: %w", err)
	}
	if s.signals, err = signals.Open(ctx, s.js, names, signals.WithLogger(s.log)); err != nil {
		return fmt.Errorf("console: open the signal log: %w", err)
	}
	if s.tr, err = transcripts.Open(ctx, s.o.Conn, s.js, names); err != nil {
		return fmt.Errorf("console: open the transcripts: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.runs = newRunTable()
	s.last, s.redactor = newLastTable(), s.o.Redactor
	if s.redactor == nil {
		s.redactor = sanitize.DefaultRedactor()
	}
	if err := s.startWatches(ctx, wctx); err != nil {
		return err
	}
	s.live = newLiveBuffer(s.now)
	if err := s.followLive(wctx); err != nil {
		return fmt.Errorf("console: follow the live output: %w", err)
	}
	if err := s.followTranscripts(ctx, wctx); err != nil {
		// the page still works; rows just show no preview or mark
		s.log.Warn("console: cannot follow the transcripts: no previews or waiting marks", "err", err)
	}
	s.charts = s.startCharts(wctx)
	return nil
}

// URL is the console's address, for people to open.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/" }

// Close stops serving and the watches. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.hub.close()
	close(s.done)
	_ = s.http.Shutdown(ctx)
	_ = s.http.Close()
	s.stopStores()
	s.wg.Wait()
}

func (s *Server) stopStores() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.index != nil {
		s.index.Stop()
	}
	if s.children != nil {
		s.children.Stop()
	}
	if s.tr != nil {
		s.tr.Close()
	}
}

// IsLoopback reports whether a host:port listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// routes is the console's HTTP surface: the embedded page, and a JSON API
// under /api/ that only the page calls.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(webFS, "web")
	mux.Handle("GET /", noCache(http.FileServerFS(sub)))
	mux.HandleFunc("POST /api/login", s.handleLogin)
	mux.HandleFunc("POST /api/logout", s.handleLogout)
	mux.HandleFunc("GET /api/me", s.handleMe)
	mux.HandleFunc("GET /signin", s.handleSignIn)
	mux.Handle("GET /api/sessions", s.viewer(s.handleSessions))
	mux.Handle("GET /api/session", s.viewer(s.handleSession))
	mux.Handle("GET /api/board", s.viewer(s.handleBoard))
	mux.Handle("GET /api/timeline", s.viewer(s.handleTimeline))
	mux.Handle("GET /api/ops", s.viewer(s.handleOps))
	mux.Handle("GET /api/events", s.viewer(s.handleEvents))
	mux.Handle("GET /api/archive", s.viewer(s.handleArchive))
	mux.Handle("GET /api/charts", s.viewer(s.handleCharts))
	mux.Handle("POST /api/archive/restore", s.actor(s.handleRestore))
	mux.Handle("POST /api/session/{op}", s.actor(s.handleSessionOp))
	mux.Handle("POST /api/stop", s.actor(s.handleStop))
	mux.Handle("POST /api/model", s.actor(s.handleModel))
	mux.Handle("POST /api/kill", s.actor(s.handleKill))
	mux.Handle("POST /api/steer", s.actor(s.handleSteer))
	mux.Handle("POST /api/chat", s.actor(s.handleChat))
	mux.Handle("POST /api/search", s.searcher(s.handleSearch))
	mux.Handle("GET /api/cron", s.viewer(s.handleCron))
	mux.Handle("POST /api/cron/run", s.actor(s.handleCronRun))
	return securityHeaders(mux)
}

// securityHeaders keep the page from running anything but its own script
// and from being framed, so hostile text that got past the renderer still
// could not run.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
