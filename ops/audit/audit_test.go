package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
	"github.com/sessionbus/sessionbus/ops/audit"
)

func TestMain(m *testing.M) {
	os.Exit(bustest.CheckLeaks(m.Run()))
}

// deployment is what `serve` leaves behind, built from the same
// packages: a data dir 0700 with the NATS keys, operator.creds and a creds
// dir holding the admin's and the agent's files (0600), and an embedded
// server on it, with auth unless insecure.
type deployment struct {
	data, admin, agent string
	srv                *embedded.Server
}

func newDeployment(t *testing.T, insecure bool) *deployment {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := auth.LoadOrCreate(filepath.Join(data, auth.Dir), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.LoadOrCreateOperator(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(data, audit.CredsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	dep := &deployment{data: data}
	for _, r := range []auth.Role{auth.RoleAdmin, auth.RoleAgent} {
		u, err := d.Mint(auth.DefaultAccount, r, string(r), bus.DefaultPrefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := u.Creds()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(data, audit.CredsDir, string(r)+".creds")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if r == auth.RoleAdmin {
			dep.admin = path
		} else {
			dep.agent = path
		}
	}
	opts := embedded.Options{DataDir: data, Listen: "127.0.0.1:-1", Sync: embedded.LazySync, Auth: d}
	if insecure {
		opts.Auth = nil
	}
	if dep.srv, err = embedded.Start(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dep.srv.Shutdown)
	return dep
}

// target is the audit of dep as `sessionbus audit` runs it with the
// admin's file.
func (dep *deployment) target(t *testing.T, cfg *config.Config) *audit.Target {
	t.Helper()
	return &audit.Target{Config: cfg, DataDir: dep.data, CredsPath: dep.admin, Probe: audit.Dial(dep.srv.URL(), dep.admin)}
}

// loadConfig writes yaml to a config file in a temp dir and loads it.
func loadConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessionbus.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mintOps writes an ops credentials file into dep's creds dir, its
// permissions changed by edit (nil: as this version mints them).
func mintOps(t *testing.T, dep *deployment, name string, edit func(*jwt.Permissions)) {
	t.Helper()
	d, err := auth.LoadOrCreate(filepath.Join(dep.data, auth.Dir), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.MintWith(auth.DefaultAccount, auth.RoleOps, "bob", bus.DefaultPrefix, 0, edit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dep.data, audit.CredsDir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func ids(r audit.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.CheckID+"/"+string(f.Severity))
	}
	return out
}

// Each row plants one weakness in an otherwise clean deployment and
// expects exactly its finding; the rows without one are near misses that
// must stay clean.
func TestAuditFindsEachWeakness(t *testing.T) {
	rows := []struct {
		name     string
		insecure bool
		plant    func(t *testing.T, dep *deployment, tg *audit.Target)
		want     []string
	}{
		{name: "auth off", insecure: true, want: []string{"nats.auth_off/high"}},
		{name: "ops creds minted when ops had the JetStream API", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			mintOps(t, dep, "ops-old.creds", func(p *jwt.Permissions) { p.Pub.Allow.Add("$JS.API.CONSUMER.CREATE.>") })
		}, want: []string{"creds.permissions_stale/high"}},
		{name: "ops creds as this version mints them", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			mintOps(t, dep, "ops.creds", nil)
		}},
		{name: "listens on every interface without TLS", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Probe.ListenHost = "0.0.0.0"
		}, want: []string{"nats.plaintext_exposed/high"}},
		{name: "every interface with TLS", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Probe.ListenHost, tg.Probe.TLSRequired = "0.0.0.0", true
		}},
		{name: "reached over the network without TLS", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Probe.URL = "nats://192.0.2.10:4222"
		}, want: []string{"nats.plaintext_exposed/high"}},
		{name: "admin creds over the network", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Probe.CredsURL = "nats://192.0.2.10:4222"
		}, want: []string{"nats.admin_creds_remote/info"}},
		{name: "agent creds over the network", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.CredsPath, tg.Probe = dep.agent, audit.Dial(dep.srv.URL(), dep.agent)
			tg.Probe.CredsURL = "nats://192.0.2.10:4222"
		}},
		{name: "server down", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Probe = audit.Dial(closedPort(t), dep.admin)
		}, want: []string{"nats.unreachable/medium"}},
		{name: "creds file readable by group", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			chmod(t, dep.agent, 0o640)
		}, want: []string{"fs.secrets.perms_open/high"}},
		{name: "NATS key readable by others", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			chmod(t, filepath.Join(dep.data, auth.Dir, "operator.nk"), 0o604)
		}, want: []string{"fs.secrets.perms_open/high"}},
		{name: "creds dir open", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			chmod(t, filepath.Join(dep.data, audit.CredsDir), 0o750)
		}, want: []string{"fs.secrets.perms_open/high"}},
		{name: "NATS key dir open", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			chmod(t, filepath.Join(dep.data, auth.Dir), 0o755)
		}, want: []string{"fs.secrets.perms_open/high"}},
		{name: "data dir open", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			chmod(t, dep.data, 0o755)
		}, want: []string{"fs.data_dir.perms_open/medium"}},
		{name: "data dir missing", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.DataDir = filepath.Join(dep.data, "elsewhere")
		}, want: []string{"fs.data_dir.missing/info"}},
		{name: "redaction off", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "logging:\n  redactSensitive: \"off\"\n")
		}, want: []string{"logging.redact_off/medium"}},
		{name: "visibility all with a sandboxed agent", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "tools:\n  sessions:\n    visibility: all\nagents:\n  list:\n    - id: box\n      sandbox:\n        mode: all\n")
		}, want: []string{"sandbox.visibility_all/high"}},
		{name: "visibility all with sandboxing by default", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "tools:\n  sessions:\n    visibility: all\nagents:\n  defaults:\n    sandbox:\n      mode: non-main\n")
		}, want: []string{"sandbox.visibility_all/high"}},
		{name: "visibility all without sandboxing", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "tools:\n  sessions:\n    visibility: all\n")
		}},
		{name: "exec agent with every tool", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      exec:\n        command: [./agent]\n")
		}, want: []string{"tools.profile.exec_wide/medium", "exec.confinement/info"}},
		{name: "exec agent under a full global profile", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "tools:\n  profile: full\nagents:\n  list:\n    - id: coder\n      runtime: exec\n")
		}, want: []string{"tools.profile.exec_wide/medium", "exec.confinement/info"}},
		{name: "exec agent coding plus agents_list", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      tools:\n        profile: coding\n        alsoAllow: [agents_list]\n")
		}, want: []string{"tools.profile.exec_wide/medium", "exec.confinement/info"}},
		{name: "exec agent with coding", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      tools:\n        profile: coding\n")
		}, want: []string{"exec.confinement/info"}},
		{name: "exec agent on a kernel without Landlock", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      tools:\n        profile: coding\n")
			tg.LandlockABI = func() int { return 0 }
		}, want: []string{"exec.unconfined/high"}},
		{name: "exec agent as another user without Landlock", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      exec:\n        user: nobody\n      tools:\n        profile: coding\n")
			tg.LandlockABI = func() int { return 0 }
		}, want: []string{"exec.confinement/info"}},
		{name: "exec agent with messaging", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "tools:\n  profile: messaging\nagents:\n  list:\n    - id: coder\n      runtime: exec\n")
		}, want: []string{"exec.confinement/info"}},
		{name: "script agent with every tool", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: scripted\n")
		}},
		{name: "long sub-agent run timeout", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  defaults:\n    subagents:\n      runTimeoutSeconds: 7200\n")
		}, want: []string{"tokens.ttl_long/medium"}},
		{name: "long run timeout of one agent", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  list:\n    - id: slow\n      subagents:\n        runTimeoutSeconds: 3541\n")
		}, want: []string{"tokens.ttl_long/medium"}},
		{name: "unlimited tool calls per session", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "quotas:\n  toolCallsPerSession: {rate: 0}\n")
		}, want: []string{"quotas.unlimited/medium"}},
		{name: "two unlimited quotas", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "quotas:\n  runsPerAgent: {rate: 0}\n  toolCallsPerAgent: {rate: 0}\n")
		}, want: []string{"quotas.unlimited/medium", "quotas.unlimited/medium"}},
		{name: "a low finite quota", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "quotas:\n  runsPerSession: {rate: 0.1, burst: 1}\n")
		}},
		{name: "run timeout at the limit", plant: func(t *testing.T, dep *deployment, tg *audit.Target) {
			tg.Config = loadConfig(t, "agents:\n  defaults:\n    subagents:\n      runTimeoutSeconds: 3540\n")
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			dep := newDeployment(t, row.insecure)
			tg := dep.target(t, config.Default())
			if row.plant != nil {
				row.plant(t, dep, tg)
			}
			r := audit.Run(tg)
			if got := ids(r); !slices.Equal(got, row.want) {
				t.Fatalf("findings %v, want %v\n%+v", got, row.want, r.Findings)
			}
			for _, f := range r.Findings {
				if f.Detail == "" || f.Fix == "" || f.Title == "" {
					t.Errorf("finding without its detail, fix or title: %+v", f)
				}
			}
		})
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

// The defaults (what serve writes, the default config, the admin's
// file on loopback) give no finding at all.
func TestAuditDefaultsClean(t *testing.T) {
	dep := newDeployment(t, false)
	r := audit.Run(dep.target(t, config.Default()))
	if len(r.Findings) != 0 || r.Summary != (audit.Summary{}) {
		t.Fatalf("defaults: %+v", r)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if !strings.Contains(text.String(), "Summary: 0 high, 0 medium, 0 low, 0 info") || !strings.Contains(text.String(), "No findings.") {
		t.Fatalf("text report:\n%s", text.String())
	}
}

// The report orders findings worst first, counts them, and prints each
// under its severity with its fix; the JSON carries the same fields.
func TestAuditReport(t *testing.T) {
	dep := newDeployment(t, true)
	tg := dep.target(t, loadConfig(t, "logging:\n  redactSensitive: \"off\"\n"))
	tg.Probe.CredsURL = "nats://192.0.2.10:4222"
	chmod(t, dep.agent, 0o644)
	r := audit.Run(tg)
	want := []string{"nats.auth_off/high", "fs.secrets.perms_open/high", "logging.redact_off/medium", "nats.admin_creds_remote/info"}
	if got := ids(r); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if r.Summary != (audit.Summary{High: 2, Medium: 1, Info: 1}) {
		t.Fatalf("summary %+v", r.Summary)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	for _, w := range []string{"Summary: 2 high, 1 medium, 0 low, 1 info", "\nHIGH\nnats.auth_off  ", "\nMEDIUM\nlogging.redact_off  ", "\nINFO\n",
		"Fix: chmod 600 " + dep.agent, `Fix: logging.redactSensitive: "tools"`} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text report lacks %q:\n%s", w, text.String())
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Summary  map[string]int      `json:"summary"`
		Findings []map[string]string `json:"findings"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Summary["high"] != 2 || back.Findings[0]["checkId"] != "nats.auth_off" || back.Findings[0]["severity"] != "high" || back.Findings[0]["fix"] == "" {
		t.Fatalf("json %s: %v", b, err)
	}
}

// The audit names the confinement in force on this host: the Landlock ABI
// for an agent that runs as the gateway's user, the OS user otherwise.
func TestAuditNamesExecConfinement(t *testing.T) {
	if confine.ABI() == 0 {
		t.Fatal("this host's kernel has no Landlock")
	}
	dep := newDeployment(t, false)
	tg := dep.target(t, loadConfig(t, "agents:\n  list:\n    - id: coder\n      runtime: exec\n      tools:\n        profile: coding\n    - id: other\n      runtime: exec\n      exec:\n        user: nobody\n      tools:\n        profile: coding\n"))
	r := audit.Run(tg)
	if len(r.Findings) != 2 {
		t.Fatalf("findings %v", ids(r))
	}
	want := []string{fmt.Sprintf("Agent coder's turns are confined by Landlock ABI v%d", confine.ABI()), `Agent other's turns run as the OS user "nobody"`}
	for i, f := range r.Findings {
		if !strings.Contains(f.Detail, want[i]) {
			t.Fatalf("finding %d: %q, want %q", i, f.Detail, want[i])
		}
	}
}
