package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessionbus/sessionbus/bus"
)

// Server is the HTTP listener of /metrics, /healthz and /readyz.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// ReadyFunc says whether the process can serve: nil when ready.
type ReadyFunc func(ctx context.Context) error

// Serve listens on addr (host:port; port 0 picks one) and serves:
//   - /metrics: m in the Prometheus text format;
//   - /healthz: 200 while the process runs;
//   - /readyz: 200 when ready(ctx) is nil, else 503 with its reason.
func Serve(addr string, m *Metrics, ready ReadyFunc, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (pass a free host:port, e.g. 127.0.0.1:9464)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, log: log}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, letting scrapes in flight finish briefly.
func (s *Server) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}

// Streams are the streams every worker and gateway opens; /readyz wants
// them all (the KV buckets are streams named KV_<bucket>).
func Streams(n bus.Names) []string {
	return []string{
		n.RunsStream(), n.TranscriptsStream(), n.SignalsStream(), n.EventsStream(),
		bus.KVStream(n.SessionsBucket()), bus.KVStream(n.RunsBucket()),
	}
}

// Ready is the usual ReadyFunc: nc is connected and every stream of
// Streams(names) exists.
func Ready(nc *nats.Conn, js jetstream.JetStream, names bus.Names) ReadyFunc {
	return func(ctx context.Context) error {
		if st := nc.Status(); st != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", st)
		}
		for _, s := range Streams(names) {
			if _, err := js.Stream(ctx, s); err != nil {
				return fmt.Errorf("stream %s: %w", s, err)
			}
		}
		return nil
	}
}
