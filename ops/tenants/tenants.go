// Package tenants runs many tenants' workers and gateways in one process:
// one NATS connection per tenant, made with that tenant's own credentials,
// so each worker and gateway sees its own account's streams, buckets and
// subjects and nothing of the others'. What the tenants share is the
// process: one Go runtime, one config, one log. A tenant costs its
// connection and its worker's and gateway's state, not a process each,
// which is what a host of thousands of tenants runs out of first.
//
// The isolation is the NATS server's, not this package's: every
// connection is a user of its tenant's account, and accounts export and
// import nothing.
package tenants

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// CredsExt is the file name ending of a tenant's credentials in a tenants
// dir: DIR/<tenant>.creds.
const CredsExt = ".creds"

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Tenant is one tenant to run: its name (for logs and errors) and the
// credentials file its connection uses. A file with the caller-token
// signing key (a gateway's or an admin's, `sessionbus creds gateway`)
// runs a worker and a gateway; a worker's file (the token issuer only)
// runs a worker.
type Tenant struct {
	Name  string
	Creds string
}

// Dir lists the tenants of a tenants dir: one per DIR/<name>.creds, sorted
// by name. Other files are ignored, so the dir may hold notes or configs.
func Dir(dir string) ([]Tenant, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tenants dir %s: %v (pass a directory holding one <tenant>.creds per tenant)", dir, err)
	}
	var out []Tenant
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), CredsExt)
		if !ok || e.IsDir() {
			continue
		}
		if !nameRe.MatchString(name) {
			return nil, fmt.Errorf("tenants dir %s: %s: name a tenant's file with 1 to 64 of A-Z, a-z, 0-9, '_' and '-' before %s", dir, e.Name(), CredsExt)
		}
		out = append(out, Tenant{Name: name, Creds: filepath.Join(dir, e.Name())})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tenants dir %s holds no <tenant>%s file: mint one per tenant with `sessionbus creds --account TENANT --out %s gateway`", dir, CredsExt, filepath.Join(dir, "TENANT"+CredsExt))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Options are what every tenant shares.
type Options struct {
	// Servers is the NATS URL(s), comma-separated.
	Servers string
	// Config is every tenant's config (its bus prefix, replicas, agents).
	Config *config.Config
	// NoGateway runs only workers, even for files with the token key.
	NoGateway bool
	// Connect are extra connect options for every tenant (TLS).
	Connect []nats.Option
	// Log is the shared log; each tenant's lines carry tenant=<name>.
	Log *slog.Logger
	// Parallel is how many tenants start at once (default 4): a tenant's
	// start is a few dozen JetStream API round trips, mostly waiting.
	Parallel int
	// StartTimeout bounds one tenant's start (default 60 s).
	StartTimeout time.Duration
}

// Host is the running tenants.
type Host struct {
	mu      sync.Mutex
	running []*running
}

type running struct {
	name string
	nc   *nats.Conn
	w    *handlers.Worker
	gw   *gateway.Gateway
}

// plan is what one tenant's credentials file says to run.
type plan struct {
	op     *bus.Operator // nil: worker only
	issuer string
	conn   []nats.Option
}

// check reads a tenant's file: its NATS user must be a worker, gateway or
// admin (an agent's or an ops user's permissions cannot run a worker),
// and it must name the token issuer.
func check(t Tenant) (plan, error) {
	var p plan
	r, err := auth.RoleOf(t.Creds)
	if err != nil {
		return p, fmt.Errorf("tenant %s: %v", t.Name, err)
	}
	if r != auth.RoleWorker && r != auth.RoleGateway && r != auth.RoleAdmin {
		return p, fmt.Errorf("tenant %s: %s holds no worker, gateway or admin user (role %q): mint one with `sessionbus creds --account %s gateway`", t.Name, t.Creds, r, t.Name)
	}
	if p.conn, err = auth.ConnectOptions(t.Creds); err != nil {
		return p, fmt.Errorf("tenant %s: %v", t.Name, err)
	}
	if op, err := bus.LoadOperator(t.Creds); err == nil {
		p.op, p.issuer = op, op.PublicKey()
		return p, nil
	}
	b, err := os.ReadFile(t.Creds)
	if err != nil {
		return p, fmt.Errorf("tenant %s: %v", t.Name, err)
	}
	if p.issuer = auth.FindIssuer(b); p.issuer == "" {
		return p, fmt.Errorf("tenant %s: %s holds neither the token key nor its issuer: mint it with `sessionbus creds --account %s gateway` (or worker)", t.Name, t.Creds, t.Name)
	}
	return p, nil
}

// Start checks every tenant's file first (nothing starts when one is
// wrong), then starts each tenant's worker (and gateway). If one fails to
// start, the ones started are stopped and the error names the tenant.
func Start(ctx context.Context, ts []Tenant, o Options) (*Host, error) {
	if len(ts) == 0 {
		return nil, errors.New("no tenants to run")
	}
	if o.Config == nil {
		o.Config = config.Default()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = time.Minute
	}
	plans := make([]plan, len(ts))
	seen := map[string]bool{}
	for i, t := range ts {
		if seen[t.Name] {
			return nil, fmt.Errorf("tenant %s is listed twice: give each tenant one credentials file", t.Name)
		}
		seen[t.Name] = true
		var err error
		if plans[i], err = check(t); err != nil {
			return nil, err
		}
	}
	h := &Host{}
	errs := make([]error, len(ts))
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			r, err := startOne(ctx, t, plans[i], o)
			if err != nil {
				errs[i] = fmt.Errorf("tenant %s: %w", t.Name, err)
				return
			}
			h.mu.Lock()
			h.running = append(h.running, r)
			h.mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.Stop(0)
		return nil, err
	}
	sort.Slice(h.running, func(i, j int) bool { return h.running[i].name < h.running[j].name })
	return h, nil
}

// startOne connects as the tenant and starts its worker and gateway on
// that one connection, as serve runs its own pair.
func startOne(ctx context.Context, t Tenant, p plan, o Options) (*running, error) {
	log := o.Log.With("tenant", t.Name)
	opts := append([]nats.Option{nats.Name("sessionbus tenant " + t.Name), nats.MaxReconnects(-1)}, p.conn...)
	nc, err := nats.Connect(o.Servers, append(opts, o.Connect...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %v", o.Servers, err)
	}
	r := &running{name: t.Name, nc: nc}
	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if r.w, err = handlers.StartWorker(sctx, nc, o.Config, bus.NewVerifier(p.issuer), log); err != nil {
		nc.Close()
		return nil, err
	}
	if p.op != nil && !o.NoGateway {
		if r.gw, err = gateway.Start(sctx, nc, o.Config, p.op, "tenants-"+t.Name, log); err != nil {
			r.stop(0)
			return nil, err
		}
	}
	return r, nil
}

func (r *running) stop(grace time.Duration) {
	if r.gw != nil {
		r.gw.Stop()
	}
	r.w.Shutdown(grace)
	r.nc.Close()
}

// Tenants lists the running tenants' names, with "+gateway" after those
// that run one.
func (h *Host) Tenants() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.running))
	for i, r := range h.running {
		out[i] = r.name
		if r.gw != nil {
			out[i] += "+gateway"
		}
	}
	return out
}

// Stop stops every tenant, in parallel: each worker drains for up to
// grace, as one worker's Shutdown does.
func (h *Host) Stop(grace time.Duration) {
	h.mu.Lock()
	rs := h.running
	h.running = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { r.stop(grace) })
	}
	wg.Wait()
}
