// Package demo is what `sessionbus serve --demo` adds: sample sessions and a
// short scenario that calls the tools over NATS, as an agent would.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
)

// Options wire the demo to a running serve.
type Options struct {
	Conn     *nats.Conn
	Operator *bus.Operator
	Deps     *handlers.Deps
	DataDir  string
	URL      string
	Out      io.Writer
	// Auth: serve runs with NATS auth (not --insecure), so every command shown needs the admin's
	// NATS user, which DataDir/operator.creds holds.
	Auth bool
	// Start is what PrepareDataDir found in DataDir (the zero value:
	// nothing said about it).
	Start DataDir
	// Home: DataDir is the home every command finds by default (its
	// client config names the URL and the credentials), so the sessionbus
	// commands shown need neither --server nor --creds.
	Home bool
	// Cmd runs this sessionbus in the commands shown ("sessionbus", or
	// "go run ./cmd/sessionbus" under go run); default "sessionbus".
	Cmd string
}

// Run imports the samples (once per data dir) and prints the scenario.
func Run(ctx context.Context, o Options) error {
	w := o.Out
	if o.Cmd == "" {
		o.Cmd = "sessionbus"
	}
	if line := o.Start.startLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	if err := importSamples(ctx, o); err != nil {
		return err
	}
	if err := o.Deps.Index.Sync(ctx); err != nil {
		return err
	}
	step := func(title, as, tool string, params string) error {
		sandboxed := strings.HasPrefix(as, "sandboxed ")
		as = strings.TrimPrefix(as, "sandboxed ")
		flag := ""
		if sandboxed {
			flag = " --sandboxed"
		}
		fmt.Fprintf(w, "\n== %s\n$ sessionbus call --as %s%s %s '%s'\n", title, as, flag, tool, params)
		tok, err := o.Operator.Mint(bus.Caller{SessionKey: as, Sandboxed: sandboxed}, time.Minute)
		if err != nil {
			return err
		}
		reply, err := bus.Call(ctx, o.Conn, o.Deps.Names, tok, tool, []byte(params))
		if e, ok := bus.AsError(err); ok && e.Code < 500 {
			fmt.Fprintf(w, "thrown error, code %d: %s\n", e.Code, e.Message)
			return nil
		}
		if err != nil {
			return err
		}
		var out bytes.Buffer
		_ = json.Indent(&out, reply, "", "  ")
		fmt.Fprintln(w, out.String())
		return nil
	}
	steps := []struct{ title, as, tool, params string }{
		{"the main session lists its agent's sessions (the demo sets tools.sessions.visibility=agent; other agents stay hidden)", "agent:main:main", "sessions_list", `{}`},
		{"mailbox triage: last-message previews and the newest message of each row", "agent:main:main", "sessions_list", `{"includeLastMessage":true,"messageLimit":1,"limit":2}`},
		{"a sandboxed sub-agent sees only itself (a sandbox clamps visibility to tree)", "sandboxed agent:main:subagent:6f1c2a9e-0b7d-4c3e-9a51-3d2f8e7b1a01", "sessions_list", `{}`},
		{"history is sanitized: reasoning tags and tool-call XML stripped, the planted key redacted, tool results left out", "agent:main:main", "sessions_history", `{"sessionKey":"main"}`},
		{"history pages backward from the newest entry", "agent:main:main", "sessions_history", `{"sessionKey":"main","offset":0,"limit":2,"includeTools":true}`},
		{"another agent's session is forbidden (a returned error, not a thrown one)", "agent:main:main", "sessions_history", `{"sessionKey":"agent:ops:main"}`},
		{"bad input is refused with the reference's message", "agent:main:main", "sessions_list", `{"limit":-1}`},
	}
	for _, s := range steps {
		if err := step(s.title, s.as, s.tool, s.params); err != nil {
			return err
		}
	}
	if err := sendScenario(ctx, o, step); err != nil {
		return err
	}
	child, err := orchestrateScenario(ctx, o)
	if err != nil {
		return err
	}
	if err := cronScenario(ctx, o); err != nil {
		return err
	}
	writer, err := liveWriter(ctx, o)
	if err != nil {
		return err
	}
	printTry(w, o, child)
	if writer != "" {
		fmt.Fprintf(w, "\n== watch the writer in the web console: its board, #/board/%s, shows it running, with Kill and Steer;\n   its page shows the turn streaming, and Stop\n", writer)
	}
	return nil
}

func importSamples(ctx context.Context, o Options) error {
	if o.Deps.Index.Get(samples[0].key) != nil {
		fmt.Fprintln(o.Out, "demo: sample sessions already in", o.DataDir)
		return nil
	}
	for _, s := range samples {
		_, err := importer.Import(ctx, o.Deps.Store, o.Deps.Transcripts, importer.ImportOptions{
			SessionKey: s.key, Label: s.label, SpawnedBy: s.spawnedBy,
		}, strings.NewReader(strings.Join(s.lines, "\n")), time.Now())
		if err != nil {
			return fmt.Errorf("import sample %s: %w", s.key, err)
		}
	}
	fmt.Fprintf(o.Out, "demo: imported %d sample sessions into %s\n", len(samples), o.DataDir)
	return nil
}

// printTry prints commands to run against this server; child is one of the
// sub-agents the scenario spawned.
func printTry(w io.Writer, o Options, child string) {
	flags, importFlags := "", ""
	if !o.Home {
		flags = serverFlag(o.URL) + " --creds " + filepath.Join(o.DataDir, bus.CredsFile)
		importFlags = serverFlag(o.URL)
		if o.Auth {
			importFlags += " --creds " + filepath.Join(o.DataDir, bus.CredsFile)
		}
	}
	srv := ""
	if o.URL != defaultURL {
		srv = " -s " + o.URL
	}
	if o.Auth {
		srv += " --creds " + filepath.Join(o.DataDir, bus.CredsFile)
	}
	fmt.Fprintf(w, `
== try it yourself (in another terminal; Ctrl-C here stops the server)
  %[6]s call%[1]s sessions_list '{"includeDerivedTitles":true}'
  %[6]s call%[1]s sessions_history '{"sessionKey":"main","includeTools":true}'
  %[6]s call%[1]s --as agent:main:subagent:6f1c2a9e-0b7d-4c3e-9a51-3d2f8e7b1a01 sessions_list '{}'
  %[6]s import%[3]s agent:main:notes < transcript.jsonl
  %[6]s chat%[1]s agent:main:main "Summarize the children"
  %[6]s call%[1]s sessions_spawn '{"task":"list the open v2 bugs","label":"bugs"}'
  %[6]s call%[1]s subagents '{"action":"list"}'
  %[6]s call%[1]s session_status '{"sessionKey":"%[5]s","changesSince":0}'
  %[6]s chat%[1]s %[5]s "Please also check the docs PRs"
  # any NATS client, with the stock nats CLI (go install github.com/nats-io/natscli/nats@v0.5.0; from the clone, go tool nats):
  nats%[2]s req sb.tools.sessions_list '{}' -H "Sessionbus-Token:$(%[6]s token%[4]s --as agent:main:main)"
  nats%[2]s micro ls
  nats%[2]s stream get SB_TRANSCRIPTS --last-for sb.tr.agent.main.main
  nats%[2]s sub sb.session.agent.main.main.notice   # the parent's notices, live
`, flags, srv, importFlags, tokenFlags(o), child, o.Cmd)
	if o.Start.state != "" {
		fmt.Fprintf(w, "\n== %s\n", o.Start.resetHint(o.Cmd))
	}
}

const defaultURL = "nats://127.0.0.1:4222"

func serverFlag(url string) string {
	if url == defaultURL {
		return ""
	}
	return " --server " + url
}

// tokenFlags are the flags of the token command shown: token reads only
// the token key, from the home's operator file unless told another.
func tokenFlags(o Options) string {
	if o.Home {
		return ""
	}
	return " --creds " + filepath.Join(o.DataDir, bus.CredsFile)
}
