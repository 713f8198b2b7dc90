package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/ops/console"
)

// The web console's rows. Both measure the console's server side over
// loopback HTTP, logged in as an admin, as the page's own requests are;
// what the browser adds (parsing and drawing the rows) is not in them.

// startConsole runs a console on the bench client's connection and
// returns an HTTP client logged in to it.
func (e *env) startConsole(ctx context.Context) (*console.Server, *http.Client, error) {
	o := console.Options{Conn: e.nc, Operator: e.op, Names: e.names, Listen: "127.0.0.1:0", Auth: e.auth != nil}
	if e.auth != nil {
		o.Account = e.auth.AccountKey(auth.DefaultAccount)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := console.Start(sctx, o)
	if err != nil {
		return nil, nil, err
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	if e.auth != nil {
		u, err := e.auth.Mint(auth.DefaultAccount, auth.RoleAdmin, "bench", e.names.Prefix, 0)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		creds, _ := u.Creds()
		body, _ := json.Marshal(map[string]string{"creds": string(creds)})
		res, err := hc.Post(c.URL()+"api/login", "application/json", strings.NewReader(string(body)))
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("console login: %s", res.Status)
			}
		}
		if err != nil {
			c.Close()
			return nil, nil, err
		}
	}
	return c, hc, nil
}

// getJSON fetches one console API path into out.
func getJSON(hc *http.Client, base, path string, out any) error {
	res, err := hc.Get(base + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("GET %s: %s %s", path, res.Status, b)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// console_list_100k: the console's first page of the sessions list (100
// rows, sessions with runs in flight first, then the newest) over the
// list inventory, against list_100k: sessions_list {"limit":100} through
// the client over the same sessions, in the same run.
func runConsoleList100k(ctx context.Context, e *env) (Result, error) {
	n := e.sz.list100k
	if err := e.ensureSessions(ctx, n); err != nil {
		return Result{}, err
	}
	c, hc, err := e.startConsole(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	var first console.Page
	if err := getJSON(hc, c.URL(), "api/sessions?limit=100", &first); err != nil {
		return Result{}, err
	}
	if len(first.Rows) != 100 || !first.More {
		return Result{}, fmt.Errorf("console first page: %d rows, more %v", len(first.Rows), first.More)
	}
	b, _ := json.Marshal(first)
	r, err := measure(ctx, e.sz.list, func() error { return getJSON(hc, c.URL(), "api/sessions?limit=100", nil) })
	r.Dataset = fmt.Sprintf("first page (100 rows) of %d sessions over HTTP, admin login", n)
	r.ReplyBytes = len(b)
	return r, err
}

// board_update: a child's run ends (its run record turns terminal, seen by
// a KV watch as announce_latency sees it) to its row on the parent's
// mission board saying "done", as the page learns it: the console's event
// stream names the change, then the page's board request shows it. One
// gateway, script echo, sequential.
func runBoardUpdate(ctx context.Context, e *env) (Result, error) {
	stop, err := e.gateways(ctx, 1, 0, gateway.DefaultConcurrency)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	c, hc, err := e.startConsole(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	const requester = "agent:main:main"
	changes, closeStream, err := eventStream(ctx, hc, c.URL())
	if err != nil {
		return Result{}, err
	}
	defer closeStream()
	d := e.worker.Deps
	stores := spawns.Stores{Registry: d.Subagents, Sessions: d.Store, Queue: d.Queue, Runs: d.Runs}
	rows := 0
	op := func() (time.Duration, error) {
		octx, cancel := opCtx(ctx)
		defer cancel()
		w, err := d.Runs.KV().WatchAll(octx, jetstream.UpdatesOnly())
		if err != nil {
			return 0, err
		}
		defer func() { _ = w.Stop() }()
		ch, err := spawns.Spawn(octx, stores, spawns.Child{Requester: requester, Agent: "main", Task: "bench"})
		if err != nil {
			return 0, err
		}
		ended, err := runEnded(octx, w, ch.RunID)
		if err != nil {
			return 0, err
		}
		done := func() (bool, error) {
			var b console.Board
			if err := getJSON(hc, c.URL(), "api/board?key="+url.QueryEscape(requester), &b); err != nil {
				return false, err
			}
			rows = len(b.Rows)
			for _, r := range b.Rows {
				if r.Key == ch.ChildSessionKey {
					return r.Status == console.StatusDone, nil
				}
			}
			return false, nil
		}
		// the console may have told the page already: look once, then on
		// every change it announces
		for ok := false; !ok; {
			if ok, err = done(); err != nil {
				return 0, err
			}
			if ok {
				break
			}
			select {
			case <-changes:
			case <-octx.Done():
				return 0, fmt.Errorf("the board never showed %s done", ch.ChildSessionKey)
			}
		}
		span := time.Since(ended)
		// let the announce's run finish: the next child finds the requester idle
		if _, err := d.Runs.Wait(octx, gateway.AnnounceRunID(ch.RunID)); err != nil {
			return 0, err
		}
		return span, nil
	}
	r, err := measureSpans(ctx, e.sz.sn, op)
	r.Dataset = fmt.Sprintf("child run end to its board row done (event stream, then the board request); 1 gateway, script echo; %d rows on the board at the end", rows)
	return r, err
}

// runEnded waits for run id's record to turn terminal and returns when.
func runEnded(ctx context.Context, w jetstream.KeyWatcher, id string) (time.Time, error) {
	for {
		select {
		case en := <-w.Updates():
			if en == nil || en.Key() != id {
				continue
			}
			var r struct{ Status string }
			if json.Unmarshal(en.Value(), &r) == nil && (r.Status == "ok" || r.Status == "error" || r.Status == "timeout") {
				return time.Now(), nil
			}
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("run %s never ended", id)
		}
	}
}

// eventStream follows the console's event stream and signals each
// "change" on the channel (dropped when nobody waits: a waiter looks at
// the board anyway).
func eventStream(ctx context.Context, hc *http.Client, base string) (<-chan struct{}, func(), error) {
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, base+"api/events", nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	stream := &http.Client{Jar: hc.Jar} // no timeout: it stays open
	res, err := stream.Do(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if res.StatusCode != http.StatusOK {
		_ = res.Body.Close()
		cancel()
		return nil, nil, errors.New("console event stream: " + res.Status)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if sc.Text() == "event: change" {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, cancel, nil
}
