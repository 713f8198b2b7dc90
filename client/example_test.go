package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/client"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
)

// exampleBus stands in for `sessionbus serve`: an embedded server on a free
// loopback port with NATS auth, a tool worker, and one session with a short
// transcript. It returns the server URL, the admin's credentials file (what
// serve writes to DATA/operator.creds: a NATS user and the token-signing
// key) and a stop function.
func exampleBus() (url, creds string, stop func()) {
	dir, err := os.MkdirTemp("", "sessionbus-example-")
	if err != nil {
		log.Fatal(err)
	}
	d, err := auth.LoadOrCreate(filepath.Join(dir, auth.Dir), auth.DefaultAccount)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:-1", Auth: d})
	if err != nil {
		log.Fatal(err)
	}
	op, err := bus.NewOperator()
	if err != nil {
		log.Fatal(err)
	}
	admin, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "example", "", 0)
	if err != nil {
		log.Fatal(err)
	}
	user, err := admin.Creds()
	if err != nil {
		log.Fatal(err)
	}
	seed, err := op.Seed()
	if err != nil {
		log.Fatal(err)
	}
	creds = filepath.Join(dir, bus.CredsFile)
	if err := os.WriteFile(creds, append(append(user, '\n'), seed...), 0o600); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL(), nats.UserCredentials(creds))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := handlers.StartWorker(ctx, nc, config.Default(), bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		log.Fatal(err)
	}
	deps := w.Deps
	transcript := strings.NewReader(`{"role":"user","content":"What is the capital of France?"}
{"role":"assistant","content":"Paris."}`)
	if _, err := importer.Import(ctx, deps.Store, deps.Transcripts, importer.ImportOptions{SessionKey: "agent:main:main", Label: "home"}, transcript, time.Now()); err != nil {
		log.Fatal(err)
	}
	if err := deps.Index.Sync(ctx); err != nil {
		log.Fatal(err)
	}
	return srv.URL(), creds, func() {
		w.Stop()
		nc.Close()
		srv.Shutdown()
		os.RemoveAll(dir)
	}
}

// Connect, mint caller tokens from the operator credentials, and list the
// sessions the caller sees.
func Example() {
	url, creds, stop := exampleBus()
	defer stop()

	nc, err := nats.Connect(url, nats.UserCredentials(creds))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	tokens, err := client.FromCreds(creds, bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	c := client.New(nc, tokens)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.SessionsList(ctx, schema.SessionsListParams{Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range list.Sessions {
		fmt.Println(s.Key, s.Label, s.Kind)
	}
	// Output:
	// agent:main:main home main
}

// Read a session's transcript, oldest message first.
func ExampleClient_SessionsHistory() {
	url, creds, stop := exampleBus()
	defer stop()
	nc, _ := nats.Connect(url, nats.UserCredentials(creds))
	defer nc.Close()
	tokens, _ := client.FromCreds(creds, bus.Caller{SessionKey: "agent:main:main"}, 0)
	c := client.New(nc, tokens)

	h, err := c.SessionsHistory(context.Background(), schema.SessionsHistoryParams{SessionKey: "main", Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range h.Messages {
		fmt.Printf("%s: %v\n", m["role"], m["content"])
	}
	// Output:
	// user: What is the capital of France?
	// assistant: Paris.
}

// Send without waiting (timeoutSeconds 0): the run is queued for a
// gateway, and the same idempotency key never queues it twice.
func ExampleClient_SessionsSend() {
	url, creds, stop := exampleBus()
	defer stop()
	nc, _ := nats.Connect(url, nats.UserCredentials(creds))
	defer nc.Close()
	tokens, _ := client.FromCreds(creds, bus.Caller{SessionKey: "agent:main:main"}, 0)
	c := client.New(nc, tokens)

	ctx := context.Background()
	noWait := 0
	p := schema.SessionsSendParams{SessionKey: "main", Message: "Summarize our chat.", TimeoutSeconds: &noWait, IdempotencyKey: "summary-1"}
	first, err := c.SessionsSend(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.SessionsSend(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Status, first.Delivery.Status, first.RunID == again.RunID)
	// Output:
	// accepted sent true
}

// A bad argument is a thrown error with its code; a token minted
// elsewhere (`sessionbus token --as KEY`) is passed as it is.
func ExampleStaticToken() {
	url, creds, stop := exampleBus()
	defer stop()
	nc, _ := nats.Connect(url, nats.UserCredentials(creds))
	defer nc.Close()
	op, _ := bus.LoadOperator(creds)
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	c := client.New(nc, client.StaticToken(tok))

	_, err := c.SessionsHistory(context.Background(), schema.SessionsHistoryParams{})
	var e *bus.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Message)
	}
	_, err = c.SessionsHistory(context.Background(), schema.SessionsHistoryParams{SessionKey: "no-such-session"})
	var r *client.Refusal
	if errors.As(err, &r) {
		fmt.Println(r.Status, r.Msg)
	}
	// Output:
	// 400 sessionKey required
	// error Session not found: no-such-session (use the full sessionKey from sessions_list)
}
