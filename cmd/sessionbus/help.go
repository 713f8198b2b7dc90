package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdHelp is what a command's -h prints above its flags: how to call it,
// what it is for in one line, and commands to copy. A first-time user
// reads the examples before the flag list, so every command has some.
type cmdHelp struct {
	usage    string   // after "usage: sessionbus "; more lines start "sessionbus "
	purpose  string   // one line
	notes    string   // optional: what else to know before the flags
	examples []string // 1-3 command lines that run as written
}

// helps is every command's help, by command name (the first word of a
// flag set's name: "session delete" uses "session").
var helps = map[string]cmdHelp{
	"serve": {
		usage:   "serve [flags]",
		purpose: "Run an embedded NATS server with JetStream, the tool workers and a gateway, until Ctrl-C.",
		notes: "--demo adds sample sessions and a scripted scenario. A data dir the demo created starts over\n" +
			"on each serve --demo; --fresh empties any sessionbus data dir before the demo runs.",
		examples: []string{
			"sessionbus serve --demo",
			"sessionbus serve --data /var/lib/sessionbus --config sessionbus.yaml",
			"sessionbus serve --cluster 3 --data ./sessionbus-cluster-data",
		},
	},
	"worker": {
		usage:   "worker [flags]",
		purpose: "Run tool workers against an existing NATS server (add as many as you like, on any host).",
		examples: []string{
			"sessionbus worker --server nats://127.0.0.1:4222 --creds ./sessionbus-data/operator.creds",
		},
	},
	"gateway": {
		usage:   "gateway [flags]",
		purpose: "Run a gateway replica: it takes agent runs from the shared queue and executes their turns.",
		examples: []string{
			"sessionbus gateway --id gw2",
			"sessionbus gateway --server nats://127.0.0.1:4222 --creds ./sessionbus-data/operator.creds --concurrency 16",
		},
	},
	"call": {
		usage:   "call [flags] TOOL [JSON]",
		purpose: "Call one tool as a session and print its JSON reply on stdout.",
		examples: []string{
			"sessionbus call sessions_list '{}'",
			`sessionbus call --as agent:main:main sessions_history '{"sessionKey":"main","limit":20}'`,
			`sessionbus call subagents '{"action":"list"}'`,
		},
	},
	"token": {
		usage:   "token [flags] --as SESSIONKEY\nsessionbus token [flags] --adapter CHANNEL|'*'",
		purpose: "Print a caller token (or a channel adapter's) for the Sessionbus-Token header of any NATS client.",
		examples: []string{
			"sessionbus token --as agent:main:main",
			"sessionbus token --adapter telegram --ttl 30m",
		},
	},
	"chat": {
		usage:   `chat [flags] [--stream] SESSIONKEY "text"`,
		purpose: "Play a human on a channel: send one message into a session and print the agent's reply.",
		examples: []string{
			`sessionbus chat agent:main:main "Summarize the children"`,
			`sessionbus chat --channel telegram --from 4242 agent:main:main "hello there"`,
			`sessionbus chat --stream agent:main:main "Write a haiku about queues"`,
		},
	},
	"import": {
		usage:   "import [flags] SESSIONKEY < transcript.jsonl\nsessionbus import [flags] --openclaw STATEDIR",
		purpose: "Load a JSONL transcript into a session, or migrate an OpenClaw state directory.",
		notes: "Importing the same file into the same session again appends nothing; an interrupted import run again appends only what is missing.\n" +
			"With --openclaw, running the same import again appends only what the OpenClaw transcripts gained since.",
		examples: []string{
			`printf '%s\n' '{"role":"user","content":"hello"}' | sessionbus import agent:main:notes`,
			"sessionbus import --openclaw ~/.openclaw",
		},
	},
	"bench": {
		usage:   "bench [flags]",
		purpose: "Run the benchmark suite against raw NATS baselines, or drive mixed tool traffic (--load).",
		examples: []string{
			"sessionbus bench --quick",
			"sessionbus bench --load 60s --load-cluster 3",
		},
	},
	"session": {
		usage:   "session delete|reset|compact [flags] SESSIONKEY\nsessionbus session goal [flags] SESSIONKEY \"text\"\nsessionbus session goal --clear [flags] SESSIONKEY",
		purpose: "Delete a session, reset it to a new empty transcript under the same key, set or clear its goal, or compact its context.",
		notes: "delete and reset archive the transcript (zstd JSONL, `sessionbus archive ls`) before anything is removed.\n" +
			"compact has a gateway summarize the session's older entries with its model (they stay in the transcript);\n" +
			"it exits 1 when nothing was compacted, saying why.",
		examples: []string{
			"sessionbus session reset agent:main:main",
			`sessionbus session goal agent:main:main "Ship the release notes by Friday"`,
			`sessionbus session compact --instructions "Focus on decisions and open questions" agent:main:main`,
		},
	},
	"archive": {
		usage:   "archive <ls|get|restore|budget> [flags] [KEY|ID]",
		purpose: "List, read and restore archived transcripts, and show the disk budget.",
		notes: `  ls [--agent ID] [--json]   list archives, oldest first (the budget's state on stderr)
  get KEY|ID                 the archived transcript, decompressed JSONL, on stdout
  restore KEY|ID             bring an archive back as a live session (never over one)
  budget                     the disk budget's state (session.maintenance.maxDiskBytes), JSON

KEY|ID is an archive id, a session key or a sessionId (the newest archive of it).
The store is the JetStream object store "archives": ` + "`nats obj ls archives`" + ` works too.`,
		examples: []string{
			"sessionbus archive ls --agent main",
			"sessionbus archive get agent:main:main > main.jsonl",
			"sessionbus archive restore agent:main:main",
		},
	},
	"creds": {
		usage: "creds [--data DIR] [--account NAME] [--prefix sb] [--name NAME] [--expiry DUR] [--out FILE] [--channel C] ROLE\n" +
			"sessionbus creds [--data DIR] [--account NAME[,NAME...]] --server-config\n" +
			"sessionbus creds --inbox-of FILE",
		purpose: "Mint a role's NATS credentials file, or print the nats-server config that trusts them.",
		notes: "ROLE is agent, adapter, worker, gateway, ops or admin. The keys are in DIR/nats-auth (created on\n" +
			"first use; serve uses the same DIR and keys). --inbox-of prints the inbox prefix a credentials\n" +
			"file's user must use (nats --inbox-prefix).",
		examples: []string{
			"sessionbus creds --name bot1 --out bot1.creds agent",
			"sessionbus creds --server-config > sessionbus-auth.conf",
			"sessionbus creds --inbox-of ./sessionbus-data/creds/agent.creds",
		},
	},
	"inspect": {
		usage:   "inspect [flags]",
		purpose: "Show streams and buckets with their sizes, consumers and their lag, stuck runs, children past their deadline, pending announces and notices.",
		examples: []string{
			"sessionbus inspect",
			"sessionbus inspect --json --stuck 5m",
		},
	},
	"replay": {
		usage:   "replay [flags] SESSIONKEY",
		purpose: "Print one session's transcript, runs and signal log in time order, from the streams (--json: one object per line).",
		examples: []string{
			"sessionbus replay agent:main:main",
			"sessionbus replay --follow --json agent:main:main",
		},
	},
	"version": {
		usage:    "version",
		purpose:  "Print the sessionbus version, the commit it was built from, and the embedded nats-server and Go versions.",
		examples: []string{"sessionbus version"},
	},
	"schema": {
		usage:   "schema [--openai] [TOOL]",
		purpose: "Print the tools' JSON Schemas (parameters and results) from this build; no server needed.",
		examples: []string{
			"sessionbus schema sessions_send",
			"sessionbus schema --openai",
		},
	},
	"mcp": {
		usage:   "mcp [flags] (--as SESSIONKEY | --token TOKEN) [--http 127.0.0.1:PORT]",
		purpose: "Serve the session tools to an MCP host as one session: on stdio, or streamable HTTP on loopback.",
		examples: []string{
			"sessionbus mcp --as agent:main:main",
			"sessionbus mcp --as agent:main:main --http 127.0.0.1:8765",
		},
	},
	"audit": {
		usage:   "audit [--server URL] [--creds FILE] [--config FILE] [--data DIR] [--json]",
		purpose: "Check a running deployment, its data dir and its config for settings that leave it open.",
		notes: "Each finding is printed with its severity (high, medium, low, info) and the fix. Exit status:\n" +
			"1 when any finding is high, 0 otherwise, 2 when the command line or the config is wrong.",
		examples: []string{
			"sessionbus audit",
			"sessionbus audit --json --config sessionbus.yaml",
		},
	},
	"completion": {
		usage:   "completion bash|zsh|fish",
		purpose: "Print a shell completion script: commands, their subcommands and their flags.",
		examples: []string{
			"source <(sessionbus completion bash)",
			`sessionbus completion zsh > "${fpath[1]}/_sessionbus"`,
			"sessionbus completion fish > ~/.config/fish/completions/sessionbus.fish",
		},
	},
	"init": {
		usage:   "init [--print] [DIR]",
		purpose: "Write DIR/sessionbus.yaml (default: here): every configuration key with its default, commented.",
		examples: []string{
			"sessionbus init",
			"sessionbus init ./deploy && sessionbus serve --config ./deploy/sessionbus.yaml",
			"sessionbus init --print",
		},
	},
}

// writeHelp prints name's help and, when fs has any, its flags.
func writeHelp(w io.Writer, name string, fs *flag.FlagSet) {
	cmd, _, _ := strings.Cut(name, " ")
	h, ok := helps[cmd]
	if !ok {
		// a command without an entry still gets its flags
		h = cmdHelp{usage: name + " [flags]"}
	}
	fmt.Fprintf(w, "usage: sessionbus %s\n", strings.ReplaceAll(h.usage, "\n", "\n       "))
	if h.purpose != "" {
		fmt.Fprintf(w, "\n%s\n", h.purpose)
	}
	if h.notes != "" {
		fmt.Fprintf(w, "\n%s\n", h.notes)
	}
	if len(h.examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range h.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if fs == nil {
		return
	}
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags:")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}
