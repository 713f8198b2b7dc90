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
			"on each serve --demo; --fresh empties any sessionbus data dir before the demo runs. The data dir\n" +
			"defaults to the home (sessionbus home): $SESSIONBUS_HOME, else ./sessionbus-data if it exists\n" +
			"here, else ~/.local/state/sessionbus; serve writes client.json there, so client commands run\n" +
			"from any folder find the server and their credentials with no flags.",
		examples: []string{
			"sessionbus serve --demo",
			"sessionbus serve --data /var/lib/sessionbus --config sessionbus.yaml",
			"sessionbus serve --cluster 3 --data ./sessionbus-cluster-data",
		},
	},
	"worker": {
		usage:   "worker [flags]",
		purpose: "Run tool workers against an existing NATS server (add as many as you like, on any host).",
		notes: "--tenants-dir DIR serves many tenants from one process: one connection per DIR/<tenant>.creds (its NATS account),\n" +
			"a worker each, and a gateway each whose file carries the token key (gateway or admin creds; --no-gateway: workers only).",
		examples: []string{
			"sessionbus worker",
			`sessionbus worker --server nats://127.0.0.1:4222 --creds "$(sessionbus home --role worker)"`,
			"sessionbus worker --server nats://127.0.0.1:4222 --tenants-dir ./tenants",
		},
	},
	"gateway": {
		usage:   "gateway [flags]",
		purpose: "Run a gateway replica: it takes agent runs from the shared queue and executes their turns.",
		examples: []string{
			"sessionbus gateway --id gw2",
			`sessionbus gateway --server nats://127.0.0.1:4222 --creds "$(sessionbus home --role gateway)" --concurrency 16`,
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
		usage:   "chat [flags] [--stream] SESSIONKEY \"text\"\nsessionbus chat --route --channel C --from PEER [--account A] [--group G] [--chat-type T] [--thread T] [--agent ID] \"text\"",
		purpose: "Play a human on a channel: send one message into a session and print the agent's reply.",
		examples: []string{
			`sessionbus chat --channel telegram --from 4242 agent:main:main "hello there"`,
			`sessionbus chat --stream agent:main:main "Write a haiku about queues"`,
			`sessionbus chat --route --channel telegram --from 4242 "hello there"`,
		},
	},
	"adapter": {
		usage:   "adapter webhook --channel C --deliver-url URL [--listen HOST:PORT] [--secret-file F] [--token-file F] [flags]",
		purpose: "Run a webhook channel adapter: POST /inbound brings a human's message into the bus (routed), and every reply on sb.deliver.<channel> is POSTed to --deliver-url, signed, retried, once per delivery id.",
		notes: "Run several for one channel: they share its durable consumer, and each reply goes to one of them.\n" +
			"A delivery the receiver never takes (--attempts) becomes a dead letter that `sessionbus inspect` lists.",
		examples: []string{
			"sessionbus adapter webhook --channel web --deliver-url http://127.0.0.1:9000/replies",
			"sessionbus adapter webhook --channel web --listen 0.0.0.0:8788 --secret-file web.secret --creds adapter-web.creds --token-file web.token --deliver-url https://chat.example.com/hook",
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
		purpose: "Run the benchmark suite against raw NATS baselines, drive mixed tool traffic (--load), or measure idle tenants on a 3-node cluster (--tenants).",
		examples: []string{
			"sessionbus bench --quick",
			"sessionbus bench --load 60s --load-cluster 3",
			"sessionbus bench --tenants 1,10,30 --tenants-idle 10s",
		},
	},
	"session": {
		usage:   "session delete|reset|compact [flags] SESSIONKEY\nsessionbus session goal [flags] SESSIONKEY \"text\"\nsessionbus session goal --clear [flags] SESSIONKEY\nsessionbus session tools [--json] [flags] SESSIONKEY\nsessionbus session send-policy [flags] SESSIONKEY on|off|inherit\nsessionbus session pin|unpin [flags] SESSIONKEY\nsessionbus session stop [flags] SESSIONKEY\nsessionbus session queue [flags] SESSIONKEY MODE",
		purpose: "Delete, reset or compact a session, set or clear its goal, list its effective tools, set its send-policy override, pin or unpin it, stop its running turn, or set its queue mode.",
		notes: "delete and reset archive the transcript (zstd JSONL, `sessionbus archive ls`) before anything is removed.\n" +
			"compact has a gateway summarize the session's older entries with its model (they stay in the transcript);\n" +
			"it exits 1 when nothing was compacted, saying why.\n" +
			"tools prints every tool this build serves, allowed or not, with the policy stage and config key that removed each missing one.\n" +
			"send-policy on|off overrides session.sendPolicy for the session (sends and deliveries to its channel); inherit removes the override.\n" +
			"pin marks the session pinned (sessions_list lists pinned sessions first; maintenance never prunes them); unpin clears it.\n" +
			"stop aborts the session's running turn on whichever gateway runs it, as /stop in the chat does (the streamed text stays in the transcript);\n" +
			"with no turn running it writes nothing.\n" +
			"queue sets what a message does while the session runs a turn, as /queue in the chat does: steer, followup, collect,\n" +
			"steer-backlog, interrupt or queue; default (or reset) clears the override (messages.queue decides again).",
		examples: []string{
			`sessionbus session goal agent:main:main "Ship the release notes by Friday"`,
			`sessionbus session compact --instructions "Focus on decisions and open questions" agent:main:main`,
			"sessionbus session queue agent:main:main collect",
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
			`sessionbus creds --inbox-of "$(sessionbus home --role agent)"`,
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
	"console": {
		usage:   "console [--server URL] [--creds FILE] [--listen HOST:PORT] [--metrics-from HOST:PORT,...]",
		purpose: "Serve the web console: live sessions, sub-agent mission boards, transcripts, webchat and the bus's health.",
		notes: "It runs as the admin (DATA/operator.creds). On a bus with auth people log in with a credentials\n" +
			"file (admin acts, ops only looks) or a session's token; see docs/console.md.",
		examples: []string{
			"sessionbus console",
			"sessionbus console --listen 127.0.0.1:4281 --creds ./sessionbus-data/operator.creds",
			"sessionbus console --metrics-from 127.0.0.1:9464,127.0.0.1:9465",
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
	"up": {
		usage:   "up [--nodes 3] [--workers 2] [--gateways 2] [--console HOST:PORT] [--data DIR] [--listen HOST:PORT] [--config FILE]",
		purpose: "Run a loopback cluster, its workers and its gateways, each a process of its own, until Ctrl-C.",
		notes: "The processes start in order (nodes, then workers, then gateways), each waited for until it is\n" +
			"ready; their output comes on stderr, each line prefixed with its process (n1, worker1, gw1).\n" +
			"Ctrl-C or SIGTERM stops them last first; up exits 0 when every one stopped cleanly.",
		examples: []string{
			"sessionbus up",
			"sessionbus up --nodes 3 --workers 2 --gateways 2 --console 127.0.0.1:4280",
			"sessionbus up --data /tmp/sb-up --listen 127.0.0.1:5222",
		},
	},
	"home": {
		usage:   "home [--role ROLE | --url]",
		purpose: "Print the data dir commands use by default, a role's credentials file in it, or the server URL clients connect to.",
		notes: "The home is $SESSIONBUS_HOME, else ./sessionbus-data when it exists in this folder (older\n" +
			"versions kept it there), else the state dir: $XDG_STATE_HOME/sessionbus or ~/.local/state/sessionbus\n" +
			"(macOS: ~/Library/Application Support/sessionbus; Windows: %LocalAppData%\\sessionbus).",
		examples: []string{
			"sessionbus home",
			`nats --js-api-prefix sb.ops.js --creds "$(sessionbus home --role ops)" stream ls`,
			"sessionbus home --url",
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
