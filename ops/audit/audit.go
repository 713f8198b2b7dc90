// Package audit checks a running deployment and its config for settings
// that leave it open, the way `openclaw security audit` does for OpenClaw:
// each check is one row of a table, finds zero or more instances of one
// weakness, and says what was found and how to fix it. `sessionbus audit`
// prints the report; it exits 1 when any finding is high.
package audit

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sessionbus/sessionbus/config"
)

// Severity is how bad a finding is. High means anyone who can reach the
// server or read the host's files gets in (the command exits 1); medium
// widens what a caller or a leaked secret can do; low and info are worth
// knowing.
type Severity string

// The severities, worst first.
const (
	High   Severity = "high"
	Medium Severity = "medium"
	Low    Severity = "low"
	Info   Severity = "info"
)

var severities = []Severity{High, Medium, Low, Info}

// Finding is one instance of a weakness. CheckID names the check (stable,
// for scripts: `jq '.findings[] | select(.severity=="high") | .checkId'`).
type Finding struct {
	CheckID  string   `json:"checkId"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Detail   string   `json:"detail"`
	Fix      string   `json:"fix"`
}

// Summary counts the findings by severity.
type Summary struct {
	High   int `json:"high"`
	Medium int `json:"medium"`
	Low    int `json:"low"`
	Info   int `json:"info"`
}

// Report is what one audit found, worst first.
type Report struct {
	Server   string    `json:"server"`
	DataDir  string    `json:"dataDir"`
	Summary  Summary   `json:"summary"`
	Findings []Finding `json:"findings"`
}

// Target is what an audit looks at.
type Target struct {
	Config *config.Config
	// DataDir is the data dir serve uses (credentials, NATS keys, the
	// JetStream store); CredsPath the credentials file the caller uses.
	DataDir   string
	CredsPath string
	// Probe is what connecting to the server showed; nil skips the checks
	// of the running server (an audit of files and config alone).
	Probe *Probe
	// LandlockABI is the Landlock ABI the gateway's host offers (0: none);
	// nil asks this host's kernel, where audit runs beside the gateway.
	LandlockABI func() int
}

// Issue is one instance a check found: what, and the command or config
// line that fixes it.
type Issue struct {
	Detail string
	Fix    string
}

// check is one row of the audit. Its severity and title are the same for
// every instance; find returns the instances (none: the check passes).
type check struct {
	id       string
	severity Severity
	title    string
	find     func(*Target) []Issue
}

// checks is the audit. A new check is a row here and its find function.
var checks = []check{
	{"nats.unreachable", Medium, "The server did not answer; its checks did not run", unreachable},
	{"nats.auth_off", High, "NATS accepts connections without credentials", authOff},
	{"nats.plaintext_exposed", High, "NATS is reachable beyond loopback without TLS", plaintextExposed},
	{"nats.admin_creds_remote", Info, "The admin's credentials are used over the network", adminCredsRemote},
	{"creds.permissions_stale", High, "A credentials file grants what its role no longer may", staleCreds},
	{"fs.secrets.perms_open", High, "Credentials or NATS keys are open to other users", secretsOpen},
	{"fs.data_dir.perms_open", Medium, "The data dir is open to other users", dataDirOpen},
	{"fs.data_dir.missing", Info, "No data dir here; its file checks did not run", dataDirMissing},
	{"logging.redact_off", Medium, "Redaction of secrets in logs is off", redactOff},
	{"sandbox.visibility_all", High, "Sandboxed agents run with session visibility all", visibilityAllSandboxed},
	{"tools.profile.exec_wide", Medium, "An exec agent may call tools beyond the coding profile", execProfileWide},
	{"exec.unconfined", High, "An exec agent runs unconfined as the gateway's user", execUnconfined},
	{"exec.confinement", Info, "How exec agents are kept from the gateway's files", execConfinement},
	{"tokens.ttl_long", Medium, "Run tokens can live longer than an hour", longTokenTTL},
	{"quotas.unlimited", Medium, "A quota is unlimited", unlimitedQuota},
}

// Run runs every check against t.
func Run(t *Target) Report {
	r := Report{DataDir: t.DataDir, Findings: []Finding{}}
	if t.Probe != nil {
		r.Server = t.Probe.Server
	}
	for _, c := range checks {
		for _, is := range c.find(t) {
			r.Findings = append(r.Findings, Finding{CheckID: c.id, Severity: c.severity, Title: c.title, Detail: is.Detail, Fix: is.Fix})
		}
	}
	// worst first; within a severity, table order
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return slices.Index(severities, a.Severity) - slices.Index(severities, b.Severity)
	})
	for _, f := range r.Findings {
		switch f.Severity {
		case High:
			r.Summary.High++
		case Medium:
			r.Summary.Medium++
		case Low:
			r.Summary.Low++
		case Info:
			r.Summary.Info++
		}
	}
	return r
}

// WriteText prints the report for a person: a summary line, then the
// findings under their severity, each with its detail and fix.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "sessionbus audit: server %s, data dir %s\n", orNone(r.Server), orNone(r.DataDir))
	s := r.Summary
	fmt.Fprintf(w, "Summary: %d high, %d medium, %d low, %d info\n", s.High, s.Medium, s.Low, s.Info)
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "\nNo findings.")
		return
	}
	var last Severity
	for _, f := range r.Findings {
		if f.Severity != last {
			fmt.Fprintf(w, "\n%s\n", strings.ToUpper(string(f.Severity)))
			last = f.Severity
		}
		fmt.Fprintf(w, "%s  %s\n  %s\n  Fix: %s\n", f.CheckID, f.Title, f.Detail, f.Fix)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
