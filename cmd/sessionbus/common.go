package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newFlags is every command's flag set: its -h (and a usage error) prints
// the command's help (purpose, examples: help.go) above its flags.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sessionbus "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { writeHelp(fs.Output(), name, fs) }
	seenFlags.note(name, fs)
	return fs
}

func newLogger(stderr io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l}))
}

func connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ErrorHandler(asyncError)}, opts...)...)
	switch {
	case errors.Is(err, nats.ErrAuthorization):
		return nil, fmt.Errorf("connect to %s: %v (the server requires credentials of its own deployment: pass --creds FILE, e.g. DATA/operator.creds or DATA/creds/ROLE.creds of the serve's data dir, or set SESSIONBUS_CREDS)", url, err)
	case errors.Is(err, nats.ErrAuthExpired):
		return nil, fmt.Errorf("connect to %s: %v (the credentials' user has expired: mint a new file with `sessionbus creds ROLE`)", url, err)
	case errors.Is(err, nats.ErrAuthRevoked):
		return nil, fmt.Errorf("connect to %s: %v (the credentials' user was revoked: mint a new file with `sessionbus creds ROLE`)", url, err)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w (is `sessionbus serve` running? pass --server)", url, err)
	}
	return nc, nil
}

// asyncError prints what the server reports outside a request, as nats.go
// would, except the refused delete of a reader's own ephemeral consumer:
// the ops role may create consumers to watch a bucket or page a stream but
// may delete none (a delete could reach the deployment's durables), so
// nats.go's clean-up of every KV watch was refused and printed as an error
// on a read that succeeded. The server drops such a consumer itself once it
// is idle.
func asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "$JS.API.CONSUMER.DELETE.") {
		return
	}
	if sub != nil {
		fmt.Fprintf(os.Stderr, "%v (subscription on %q)\n", err, sub.Subject)
		return
	}
	fmt.Fprintln(os.Stderr, err)
}

// fail prints the CLI's error shape on stderr: {"error": "...", "code": N}.
func fail(stderr io.Writer, code int, err error) int {
	e, ok := bus.AsError(err)
	if !ok {
		e = &bus.Error{Code: code, Message: err.Error()}
	}
	b, _ := json.Marshal(e)
	fmt.Fprintln(stderr, string(b))
	return 1
}

// printReply prints a worker's JSON reply as printJSON prints it (indented)
// and answers exit code 0.
func printReply(w io.Writer, reply []byte) int {
	var v any
	_ = json.Unmarshal(reply, &v)
	printJSON(w, v)
	return 0
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

// commandSetup builds the logger and loads the config every long-running
// command needs; a config error is printed as one line naming the command.
func commandSetup(name, cfgPath, level string, stderr io.Writer) (*slog.Logger, *config.Config, error) {
	log := newLogger(stderr, level)
	cfg, err := config.Load(cfgPath, log)
	if err != nil {
		return nil, nil, failLine(stderr, name, err)
	}
	return log, cfg, nil
}

// failLine prints "sessionbus NAME: err" and returns err, for the commands
// whose errors are one line on stderr, exit 1.
func failLine(stderr io.Writer, name string, err error) error {
	fmt.Fprintf(stderr, "sessionbus %s: %v\n", name, err)
	return err
}

// catchStop catches SIGINT and SIGTERM from now on, for a long-running
// command to shut down in order. Commands call it before they start, so a
// signal sent the moment "ready" is printed (or during start-up) is a
// clean shutdown, not the default death of the process.
func catchStop() (sigs <-chan os.Signal, release func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}

// closeConn is the last step of a long-running command's shutdown: a
// round trip first, so the server has processed every reply, ack and nak
// published before; serve's embedded server shuts down right after, and
// could drop what was still in the socket.
func closeConn(nc *nats.Conn) {
	_ = nc.FlushTimeout(5 * time.Second)
	nc.Close()
}

// shutdownGraceFlag is --shutdown-grace of the commands that run workers.
func shutdownGraceFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("shutdown-grace", bus.DefaultShutdownGrace,
		"on SIGINT/SIGTERM, how long requests in flight may still finish; a sessions_send still waiting then answers accepted with its runId")
}

// checkShutdownGrace refuses a negative --shutdown-grace.
func checkShutdownGrace(name string, grace time.Duration, stderr io.Writer) bool {
	if grace < 0 {
		_ = failLine(stderr, name, fmt.Errorf("--shutdown-grace %v is negative: use 0 (end waits at once) or more", grace))
		return false
	}
	return true
}
