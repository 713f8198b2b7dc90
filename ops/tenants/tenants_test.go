package tenants_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/ops/tenants"
)

// tenant is one tenant as the test sees it: its token key, and a watcher
// connection of its own account that records every subject it may read.
type tenant struct {
	name  string
	op    *bus.Operator
	nc    *nats.Conn // a gateway-role user of the tenant's account
	js    jetstream.JetStream
	mu    sync.Mutex
	seen  []string // subject and payload of every message the watcher got
	child string   // the session its requester spawned
}

func (tn *tenant) record(m *nats.Msg) {
	tn.mu.Lock()
	tn.seen = append(tn.seen, m.Subject+" "+string(m.Data))
	tn.mu.Unlock()
}

func (tn *tenant) saw(s string) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return slices.ContainsFunc(tn.seen, func(m string) bool { return strings.Contains(m, s) })
}

func (tn *tenant) requester() string { return "agent:main:req-" + tn.name }

// marker is a string only tenant tn's traffic carries.
func (tn *tenant) marker() string { return "marker-of-" + tn.name }

func (tn *tenant) call(t *testing.T, tool, params string) ([]byte, error) {
	t.Helper()
	tok, err := tn.op.Mint(bus.Caller{SessionKey: tn.requester()}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return callWith(tn.nc, tok, tool, params)
}

func callWith(nc *nats.Conn, tok, tool, params string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Call(ctx, nc, bus.NewNames(""), tok, tool, []byte(params))
}

const nTenants = 10

// startTenants runs nTenants accounts on one server, each tenant's worker
// and gateway in one tenants.Host, and a watcher per tenant.
func startTenants(t *testing.T) ([]*tenant, *tenants.Host) {
	t.Helper()
	names := make([]string, nTenants)
	for i := range names {
		names[i] = fmt.Sprintf("T%02d", i)
	}
	d, err := auth.LoadOrCreate(filepath.Join(t.TempDir(), auth.Dir), names...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Sync: embedded.LazySync, Auth: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	dir := t.TempDir()
	var ts []*tenant
	for _, n := range names {
		tn := &tenant{name: n, op: bustest.Operator(t)}
		writeTenantCreds(t, d, tn.op, n, filepath.Join(dir, n+tenants.CredsExt))
		u, err := d.Mint(n, auth.RoleGateway, "watcher-"+n, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		tn.nc, tn.js = bustest.ConnectURL(t, s.URL(), u.Options()...)
		for _, subj := range []string{"sb.>", "$KV.>", "$O.>", "$JS.>"} {
			if _, err := tn.nc.Subscribe(subj, tn.record); err != nil {
				t.Fatal(err)
			}
		}
		if err := tn.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tn)
	}
	list, err := tenants.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Tools.Sessions.Visibility = "all" // a tenant's list shows everything its account holds
	cfg.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := tenants.Start(ctx, list, tenants.Options{Servers: s.URL(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(time.Second) })
	return ts, h
}

// writeTenantCreds writes what `sessionbus creds --account NAME gateway`
// writes: a gateway user of the account, then the tenant's token key.
func writeTenantCreds(t *testing.T, d *auth.Deployment, op *bus.Operator, account, path string) {
	t.Helper()
	u, err := d.Mint(account, auth.RoleGateway, "tenant-"+account, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := op.Seed()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append(b, '\n'), seed...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Ten tenants in one process: each one's sessions, buckets, notices and
// calls stay in its account, and one tenant's flood of calls does not fail
// another's.
func TestTenantsIsolation(t *testing.T) {
	ts, h := startTenants(t)
	if got := h.Tenants(); len(got) != nTenants || !strings.HasSuffix(got[0], "+gateway") {
		t.Fatalf("running tenants %v, want %d each with a gateway", got, nTenants)
	}
	// every tenant spawns a child (a run on its own gateway, whose end
	// is a notice to the requester) and waits on a send to it
	var wg sync.WaitGroup
	for _, tn := range ts {
		wg.Go(func() {
			out, err := tn.call(t, "sessions_spawn", fmt.Sprintf(`{"task":"%s task"}`, tn.marker()))
			var res struct{ Status, ChildSessionKey, Error string }
			if err == nil {
				err = json.Unmarshal(out, &res)
			}
			if err != nil || res.Status != "accepted" {
				t.Errorf("%s: spawn: %v %s", tn.name, err, out)
				return
			}
			tn.child = res.ChildSessionKey
			out, err = tn.call(t, "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"%s send","timeoutSeconds":30}`, tn.child, tn.marker()))
			if err != nil || !strings.Contains(string(out), `"ok"`) {
				t.Errorf("%s: send to its child: %v %s", tn.name, err, out)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, tn := range ts {
		checkOwnView(t, tn, ts)
	}
	// a barrier: once each watcher has its own late message, what the
	// others published before it has been delivered to whoever may read it
	for _, tn := range ts {
		if err := tn.nc.Publish("sb.test.barrier", []byte(tn.name+" barrier")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range ts {
		bustest.WaitFor(t, 30*time.Second, tn.name+"'s own notice and barrier", func() bool {
			return tn.saw(tn.name+" barrier") && tn.saw(tn.marker())
		})
	}
	for _, tn := range ts {
		for _, other := range ts {
			if other != tn && (tn.saw(other.marker()) || tn.saw(other.child) || tn.saw(other.name+" barrier")) {
				t.Errorf("%s's account carried %s's traffic", tn.name, other.name)
			}
		}
	}
	checkFlood(t, ts)
}

// checkOwnView: a tenant's list, its sessions bucket and its worker see
// its own sessions only, and its worker refuses another tenant's token.
func checkOwnView(t *testing.T, tn *tenant, ts []*tenant) {
	t.Helper()
	out, err := tn.call(t, "sessions_list", `{"limit":100}`)
	if err != nil {
		t.Fatalf("%s: sessions_list: %v", tn.name, err)
	}
	if !strings.Contains(string(out), tn.child) {
		t.Errorf("%s: sessions_list lacks its own child %s: %s", tn.name, tn.child, out)
	}
	kv, err := tn.js.KeyValue(bustest.Context(t), bus.NewNames("").SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	for _, other := range ts {
		if other == tn {
			continue
		}
		if strings.Contains(string(out), other.child) || strings.Contains(string(out), other.requester()) {
			t.Errorf("%s: sessions_list shows %s's sessions: %s", tn.name, other.name, out)
		}
		if slices.ContainsFunc(all, func(k string) bool { return strings.Contains(k, "req-"+other.name) }) {
			t.Errorf("%s: its sessions bucket holds %s's sessions: %v", tn.name, other.name, all)
		}
	}
	// another tenant's token, sent on this tenant's connection, reaches
	// this tenant's worker, which trusts its own token key only
	other := ts[(slices.Index(ts, tn)+1)%len(ts)]
	tok, err := other.op.Mint(bus.Caller{SessionKey: other.requester()}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := callWith(tn.nc, tok, "sessions_list", `{}`); !bustest.IsCode(err, 401) {
		t.Errorf("%s's worker answered %s's token with %v, want 401", tn.name, other.name, err)
	}
}

// checkFlood: the first tenant calls sessions_list from 16 callers at once
// while every other tenant makes its calls one by one: none of theirs
// fails. The flooder's own refusals (its quota) are its business.
func checkFlood(t *testing.T, ts []*tenant) {
	t.Helper()
	flooder, rest := ts[0], ts[1:]
	tok, err := flooder.op.Mint(bus.Caller{SessionKey: flooder.requester()}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var flooded atomic.Int64
	var fwg sync.WaitGroup
	for range 16 {
		fwg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = callWith(flooder.nc, tok, "sessions_list", `{"limit":100}`)
				flooded.Add(1)
			}
		})
	}
	// the others start once the flood is under way
	bustest.WaitFor(t, 30*time.Second, "the flood to start", func() bool { return flooded.Load() >= 50 })
	var failed atomic.Int64
	var wg sync.WaitGroup
	for _, tn := range rest {
		wg.Go(func() {
			for i := range 20 {
				tool, params := "sessions_list", `{"limit":10}`
				if i%2 == 1 {
					tool, params = "session_status", fmt.Sprintf(`{"sessionKey":%q}`, tn.child)
				}
				if _, err := tn.call(t, tool, params); err != nil {
					failed.Add(1)
					t.Logf("%s: %s during the flood: %v", tn.name, tool, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	fwg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d calls of the other tenants failed during tenant %s's flood (%d calls)", n, 20*len(rest), flooder.name, flooded.Load())
	}
}

// A tenants dir lists its .creds files, sorted, and refuses one with no
// tenant file or a badly named one; a file that holds no worker, gateway
// or admin user is refused before anything starts.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := tenants.Dir(dir); err == nil || !strings.Contains(err.Error(), "sessionbus creds --account") {
		t.Errorf("empty dir: %v", err)
	}
	for _, f := range []string{"b.creds", "a.creds", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tenants.Dir(dir)
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("Dir = %v, %v; want a and b", got, err)
	}
	_, err = tenants.Start(context.Background(), got, tenants.Options{Servers: "nats://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "tenant a") {
		t.Errorf("a file with no NATS user: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad name.creds"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tenants.Dir(dir); err == nil || !strings.Contains(err.Error(), "bad name.creds") {
		t.Errorf("badly named file: %v", err)
	}
}
