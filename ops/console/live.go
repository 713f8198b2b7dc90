package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// What browsers are told: which sessions changed (their entries, runs or
// sub-agent records), coalesced over a short window so a burst of writes
// becomes one refresh. The page then asks for the rows it shows; nothing
// here carries a list, so a page at 100,000 sessions costs what one page
// of rows costs.

// flushEvery is how often pending changes are sent to browsers.
const flushEvery = 100 * time.Millisecond

// maxChangedKeys caps the keys one change names; above it the change says
// "many" and every view refreshes.
const maxChangedKeys = 200

// change is one coalesced notification.
type change struct {
	Keys  []string `json:"keys,omitempty"`
	Many  bool     `json:"many,omitempty"`
	Board bool     `json:"board,omitempty"`
}

type hub struct {
	mu      sync.Mutex
	subs    map[chan change]struct{}
	pending map[string]bool
	many    bool
	board   bool
	closed  bool
	stop    chan struct{}
}

func newHub() *hub {
	h := &hub{subs: map[chan change]struct{}{}, pending: map[string]bool{}, stop: make(chan struct{})}
	go h.run()
	return h
}

func (h *hub) mark(key string, board bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) >= maxChangedKeys {
		h.many = true
	} else if key != "" {
		h.pending[key] = true
	}
	h.board = h.board || board
}

func (h *hub) run() {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		if len(h.pending) == 0 && !h.many && !h.board {
			h.mu.Unlock()
			continue
		}
		c := change{Many: h.many, Board: h.board}
		for k := range h.pending {
			c.Keys = append(c.Keys, k)
		}
		slices.Sort(c.Keys)
		h.pending, h.many, h.board = map[string]bool{}, false, false
		for ch := range h.subs {
			select {
			case ch <- c:
			default: // a slow browser misses one; the next refresh catches up
			}
		}
		h.mu.Unlock()
	}
}

func (h *hub) subscribe() (chan change, func()) {
	ch := make(chan change, 16)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.subs[ch] = struct{}{}
	}
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
}

// startWatches follows the sessions, sub-agent and run buckets. A change
// is announced only once the console's own index has applied it, so a
// browser that refreshes on the announcement reads the new state.
func (s *Server) startWatches(ctx, wctx context.Context) error {
	kvs := []struct {
		bucket string
		meta   bool
		apply  func(jetstream.KeyValueEntry)
	}{
		{s.o.Names.SessionsBucket(), true, func(e jetstream.KeyValueEntry) {
			_ = s.index.WaitApplied(wctx, e.Revision())
			if e.Operation() != jetstream.KeyValuePut {
				// its transcript went with it: no preview of the old one
				s.last.remove(decodeKey(e.Key()))
			}
			s.hub.mark(decodeKey(e.Key()), false)
		}},
		{s.o.Names.SubagentsBucket(), true, func(e jetstream.KeyValueEntry) {
			_ = s.children.WaitApplied(wctx, e.Revision())
			s.hub.mark(decodeKey(e.Key()), true)
		}},
		{s.o.Names.RunsBucket(), false, func(e jetstream.KeyValueEntry) {
			if key := s.runs.apply(e); key != "" {
				s.hub.mark(key, true)
			}
		}},
	}
	for _, k := range kvs {
		kv, err := s.js.KeyValue(ctx, k.bucket)
		if err != nil {
			return fmt.Errorf("console: open bucket %s: %w", k.bucket, err)
		}
		opts := []jetstream.WatchOpt{}
		if k.meta {
			opts = append(opts, jetstream.MetaOnly(), jetstream.UpdatesOnly())
		}
		w, err := kv.WatchAll(wctx, opts...)
		if err != nil {
			return fmt.Errorf("console: watch bucket %s: %w", k.bucket, err)
		}
		ready := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			record.Follow(wctx, w, ready, k.apply)
		}()
		if !k.meta {
			select {
			case <-ready:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// runTable keeps the recent runs of each session from the runs bucket:
// the detail page's run list, and which sessions have a run in flight
// (listed first).
type runTable struct {
	mu        sync.RWMutex
	byRun     map[string]*runs.Record
	bySession map[string][]string // run ids, oldest first, at most keepRuns
	// inFlight holds the runs pending or running, by session, so listing
	// the sessions with a run in flight never walks every run
	inFlight map[string]map[string]bool
}

const keepRuns = 20

func newRunTable() *runTable {
	return &runTable{byRun: map[string]*runs.Record{}, bySession: map[string][]string{}, inFlight: map[string]map[string]bool{}}
}

// track notes whether run r is in flight (mu held).
func (t *runTable) track(r *runs.Record, live bool) {
	set := t.inFlight[r.SessionKey]
	if live {
		if set == nil {
			set = map[string]bool{}
			t.inFlight[r.SessionKey] = set
		}
		set[r.RunID] = true
		return
	}
	delete(set, r.RunID)
	if len(set) == 0 {
		delete(t.inFlight, r.SessionKey)
	}
}

// apply takes one watch entry and returns the session it concerns.
func (t *runTable) apply(e jetstream.KeyValueEntry) string {
	if e.Operation() != jetstream.KeyValuePut {
		t.mu.Lock()
		defer t.mu.Unlock()
		if r := t.byRun[e.Key()]; r != nil {
			delete(t.byRun, e.Key())
			t.track(r, false)
			return r.SessionKey
		}
		return ""
	}
	var r runs.Record
	if json.Unmarshal(e.Value(), &r) != nil || r.SessionKey == "" {
		return ""
	}
	r.Reply = "" // replies are read through the tools, with redaction
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.byRun[r.RunID]; !known {
		ids := append(t.bySession[r.SessionKey], r.RunID)
		if len(ids) > keepRuns {
			if old := t.byRun[ids[0]]; old != nil {
				t.track(old, false)
			}
			delete(t.byRun, ids[0])
			ids = ids[1:]
		}
		t.bySession[r.SessionKey] = ids
	}
	t.byRun[r.RunID] = &r
	t.track(&r, !r.Terminal())
	return r.SessionKey
}

// recent is a session's recent runs, newest first.
func (t *runTable) recent(key string) []runs.Record {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ids := t.bySession[key]
	out := make([]runs.Record, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		if r := t.byRun[ids[i]]; r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// active reports whether a session has a run pending or running.
func (t *runTable) active(key string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.inFlight[key]) > 0
}

// activeKeys lists the sessions with a run in flight.
func (t *runTable) activeKeys() map[string]bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]bool, len(t.inFlight))
	for k := range t.inFlight {
		out[k] = true
	}
	return out
}

// running is every run pending or running.
func (t *runTable) running() []runs.Record {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []runs.Record
	for _, set := range t.inFlight {
		for id := range set {
			if r := t.byRun[id]; r != nil {
				out = append(out, *r)
			}
		}
	}
	slices.SortFunc(out, func(a, b runs.Record) int { return int(a.CreatedAt - b.CreatedAt) })
	return out
}

// handleEvents is the page's event stream (server-sent events): "change"
// when sessions, runs or sub-agents change, and with ?session=KEY "live"
// for every live-output message of that session's turns.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	u := userOf(r)
	changes, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	var live chan []byte
	var kept [][]byte
	truncated := false
	if key := r.URL.Query().Get("session"); key != "" {
		if u.Token != "" && key != u.Session {
			writeError(w, http.StatusForbidden, "a token login follows its own session's turns only")
			return
		}
		var cancel func()
		kept, truncated, live, cancel = s.live.subscribe(key)
		defer cancel()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: hello\ndata: {\"connected\":%t}\n\n", s.o.Conn.IsConnected())
	// the running turn from its first message, then what follows
	for _, line := range kept {
		fmt.Fprintf(w, "event: live\ndata: %s\n\n", line)
	}
	if truncated {
		// what the turn sent past its bound was not kept
		fmt.Fprintf(w, "event: live-cut\ndata: {}\n\n")
	}
	fl.Flush()
	// the bus connection's state is looked at every second and sent when
	// it changes (the page then says the bus is down), and every 15 s
	// anyway, which also keeps proxies from closing an idle stream
	check := time.NewTicker(time.Second)
	defer check.Stop()
	connected, quiet := s.o.Conn.IsConnected(), 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case c := <-changes:
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
		case line := <-live:
			fmt.Fprintf(w, "event: live\ndata: %s\n\n", line)
		case <-check.C:
			now := s.o.Conn.IsConnected()
			if quiet++; now == connected && quiet < 15 {
				continue
			}
			connected, quiet = now, 0
			fmt.Fprintf(w, "event: bus\ndata: {\"connected\":%t}\n\n", now)
		}
		fl.Flush()
	}
}

// decodeKey is a bucket key's session key (the encoded form when it does
// not decode, which names it well enough for a refresh).
func decodeKey(enc string) string {
	if k, err := bus.DecodeKey(enc); err == nil {
		return k
	}
	return enc
}

// get is one run's record, nil when unknown.
func (t *runTable) get(id string) *runs.Record {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byRun[id]
}
