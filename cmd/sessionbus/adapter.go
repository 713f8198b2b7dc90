package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/webhook"
	"github.com/sessionbus/sessionbus/ops/console"
)

// cmdAdapter runs a channel adapter; webhook is the one there is.
func cmdAdapter(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "webhook" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return cmdAdapter([]string{"webhook", "-h"}, nil, stdout, stdout)
		}
		writeHelp(stderr, "adapter", nil)
		return 2
	}
	fs := newFlags("adapter webhook", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "NATS credentials: the adapter role's (`sessionbus creds --channel C adapter`), or the operator's file, whose token key also mints the ingress token")
	channel := fs.String("channel", "", "the channel this adapter serves (required): messages come in on it, replies on sb.deliver.<channel> go out")
	listen := fs.String("listen", "127.0.0.1:8788", "HTTP address of POST /inbound (host:port); a non-loopback one needs --secret-file")
	deliverURL := fs.String("deliver-url", "", "where every reply is POSTed (required): http:// or https:// URL")
	secretFile := fs.String("secret-file", "", "file holding the shared secret: /inbound then needs a valid X-Sessionbus-Timestamp and X-Sessionbus-Signature, and deliveries carry them")
	legacySigs := fs.Bool("legacy-signatures", false, "with --secret-file, also take /inbound requests without X-Sessionbus-Timestamp signed over the body alone, which can be replayed, and sign deliveries that way: only while senders and receivers move to timestamped signatures")
	tokenFile := fs.String("token-file", "", "file holding the adapter token for sb.inbound (`sessionbus token --adapter C`), read on every message so it can be rotated; default: minted with --creds' token key")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	inFlight := fs.Int("max-in-flight", webhook.DefaultInFlight, "deliveries handed out at once over every adapter of the channel; 1 keeps replies in order across processes, more posts several sessions at once (one per session)")
	ackWait := fs.Duration("ack-wait", webhook.DefaultAckWait, "a delivery an adapter took and did not ack (it died) goes to another adapter after this long; longer than --timeout")
	attempts := fs.Int("attempts", webhook.DefaultAttempts, "POSTs of one delivery before it becomes a dead letter")
	backoff := fs.Duration("backoff", webhook.DefaultBackoff, "wait after the first failed POST; doubles each time up to 1m")
	timeout := fs.Duration("timeout", webhook.DefaultTimeout, "one POST to --deliver-url")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "sessionbus adapter webhook: unexpected argument %q (it takes flags only)\n", fs.Arg(0))
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sessionbus adapter webhook: "+format+"\n", a...)
		return 2
	}
	if *channel == "" || *deliverURL == "" {
		return usageErr("--channel and --deliver-url are required")
	}
	ch, err := bus.NormalizeChannel(*channel)
	if err != nil {
		return usageErr("--channel: %v", err)
	}
	if *inFlight < 1 || *attempts < 1 || *ackWait <= 0 || *backoff <= 0 || *timeout <= 0 {
		return usageErr("--max-in-flight and --attempts must be 1 or more, --ack-wait, --backoff and --timeout positive")
	}
	if *ackWait <= *timeout {
		return usageErr("--ack-wait %v must be longer than --timeout %v: another adapter would take a delivery this one is still posting", *ackWait, *timeout)
	}
	var secret []byte
	if *secretFile != "" {
		if secret, err = readSecret(*secretFile); err != nil {
			return usageErr("--secret-file: %v", err)
		}
	} else if *legacySigs {
		return usageErr("--legacy-signatures needs --secret-file: without a secret nothing is signed")
	} else if !console.IsLoopback(*listen) {
		return usageErr("--listen %s is not a loopback address: anyone who reaches it could speak as any human on %s; give --secret-file", *listen, ch)
	}
	token, err := adapterTokenSource(*tokenFile, *creds, ch)
	if err != nil {
		return usageErr("%v", err)
	}
	sigs, release := catchStop()
	defer release()
	log := newLogger(stderr, *logLevel)
	nc, err := server.connect("sessionbus adapter webhook "+ch, credsOptions(*creds)...)
	if err != nil {
		_ = failLine(stderr, "adapter webhook", err)
		return 1
	}
	defer closeConn(nc)
	host, _ := os.Hostname()
	a, err := webhook.New(nc, webhook.Options{Channel: ch, DeliverURL: *deliverURL, Secret: secret, LegacySignatures: *legacySigs, Names: bus.NewNames(*prefix),
		Token: token, MaxInFlight: *inFlight, AckWait: *ackWait, Attempts: *attempts, Backoff: *backoff, Timeout: *timeout,
		Instance: fmt.Sprintf("%s:%d", host, os.Getpid()), Log: log})
	if err != nil {
		return usageErr("%v", err)
	}
	return serveAdapter(a, *listen, *deliverURL, sigs, stdout, stderr)
}

// serveAdapter starts the deliveries, then /inbound, prints the ready line
// and runs until a signal.
func serveAdapter(a *webhook.Adapter, listen, deliverURL string, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// a signal while waiting for the deliveries stream ends the wait
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	d, err := a.Start(ctx)
	if err != nil {
		cancel()
		_ = failLine(stderr, "adapter webhook", err)
		return 1
	}
	defer d.Stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		cancel()
		_ = failLine(stderr, "adapter webhook", err)
		return 1
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s%s, delivering to %s\n", ln.Addr(), webhook.InboundPath, deliverURL)
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return 0
}

// readSecret reads a shared secret: the file's content without the
// surrounding whitespace an editor or echo adds.
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, fmt.Errorf("%s is empty: write a long random secret into it (e.g. `openssl rand -hex 32 > %s`)", path, path)
	}
	return []byte(s), nil
}

// adapterTokenSource is where the adapter's ingress token comes from: the
// token file, read on each call, or, without one, tokens minted with the
// creds' token key and minted again before they expire.
func adapterTokenSource(tokenFile, creds, channel string) (func() (string, error), error) {
	if tokenFile != "" {
		read := func() (string, error) {
			b, err := os.ReadFile(tokenFile)
			if err != nil {
				return "", err
			}
			if t := strings.TrimSpace(string(b)); t != "" {
				return t, nil
			}
			return "", fmt.Errorf("%s is empty: write `sessionbus token --adapter %s --ttl 24h` into it", tokenFile, channel)
		}
		if _, err := read(); err != nil {
			return nil, fmt.Errorf("--token-file: %v", err)
		}
		return read, nil
	}
	op, err := bus.LoadOperator(creds)
	if err != nil {
		return nil, fmt.Errorf("--creds %s has no token key to mint the ingress token (%v): give --token-file with `sessionbus token --adapter %s --ttl 24h`", creds, err, channel)
	}
	var mu sync.Mutex
	var tok string
	var renewAt time.Time
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if tok == "" || time.Now().After(renewAt) {
			t, err := op.Mint(bus.Caller{Adapter: channel}, bus.DefaultTokenTTL)
			if err != nil {
				return "", errors.Join(errors.New("mint the adapter token"), err)
			}
			tok, renewAt = t, time.Now().Add(bus.DefaultTokenTTL/2)
		}
		return tok, nil
	}, nil
}
