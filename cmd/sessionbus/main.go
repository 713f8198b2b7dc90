// Command sessionbus serves OpenClaw's agent session tools over NATS.
// This package only parses flags and wires packages together.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: sessionbus <command> [flags]

commands:
  serve     embedded NATS server + tool workers (--demo adds a scripted scenario)
  worker    tool workers against an existing NATS server
  gateway   a gateway replica: runs agent turns from the shared run queue
  call      call one tool and print its reply
  token     print a caller token for any NATS client (--adapter: a channel adapter's)
  chat      play a human on a channel: send one message into a session, print the reply
  adapter   run a channel adapter: webhook takes messages over HTTP and POSTs the replies
  import    load a JSONL transcript (stdin) into a session
  bench     run the benchmark suite
  session   delete|reset a session (its transcript archived first)
  cron      schedule agent turns: add|list|edit|enable|disable|rm|run|runs (OpenClaw's cron jobs)
  archive   ls|get|restore|budget: archived transcripts and the disk budget
  creds     mint a role's NATS credentials file, or print the server config that trusts them
  inspect   streams, buckets, consumer lag, stuck runs, pending announces and notices
  replay    one session's transcript, runs and signal log in time order (--follow)
  version   print the version, commit and nats-server version
  schema    print the tools' JSON Schemas (parameters and results)
  mcp       serve the session tools to an MCP host (stdio, or --http on loopback)
  console   the web console: sessions, mission board, transcripts, chat, ops
  audit     check a deployment and its config for open settings (exit 1 on a high finding)
  init      write an example sessionbus.yaml: every config key with its default
  completion  print a shell completion script (bash, zsh or fish)
  up        run a cluster, its workers and gateways on this machine, each a process of its own
  indexer   a transcript search indexer: a full-text index of every transcript, served to search
  search    find a phrase in every transcript (ops and admin)
  home      print the data dir commands use by default, a role's credentials file, or the server URL

Run 'sessionbus <command> -h' for its purpose, examples and flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func([]string, io.Reader, io.Writer, io.Writer) int{
		"serve":      cmdServe,
		"worker":     cmdWorker,
		"call":       cmdCall,
		"token":      cmdToken,
		"import":     cmdImport,
		"bench":      cmdBench,
		"gateway":    cmdGateway,
		"chat":       cmdChat,
		"adapter":    cmdAdapter,
		"session":    cmdSession,
		"cron":       cmdCron,
		"archive":    cmdArchive,
		"creds":      cmdCreds,
		"inspect":    cmdInspect,
		"replay":     cmdReplay,
		"version":    cmdVersion,
		"schema":     cmdSchema,
		"mcp":        cmdMCP,
		"audit":      cmdAudit,
		"console":    cmdConsole,
		"init":       cmdInit,
		"completion": cmdCompletion,
		"home":       cmdHome,
		"up":         cmdUp,
		"indexer":    cmdIndexer,
		"search":     cmdSearch,
	}
	c, ok := cmds[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "sessionbus: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	noteHome(args[0], args[1:], stderr)
	return c(args[1:], stdin, stdout, stderr)
}
