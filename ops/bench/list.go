package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// listEntry is session i of the list inventory (sessions.Sample).
func listEntry(i int, now int64) *sessions.Entry { return sessions.Sample(i, now) }

// ensureSessions grows the sessions bucket to n entries (sessionsLoad),
// then waits until the worker's index has applied them.
func (e *env) ensureSessions(ctx context.Context, n int) error {
	if e.sessions >= n {
		return nil
	}
	from := e.sessions
	return e.timed(fmt.Sprintf("sessions: %d to %d entries in atomic batches, + worker index catch-up", from, n), n-from, func() error {
		if err := e.loadSessions(ctx, from, n); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := e.worker.Deps.Index.Sync(sctx); err != nil {
			return err
		}
		if got := e.worker.Deps.Index.Len(); got < n {
			return fmt.Errorf("worker index has %d sessions, want %d", got, n)
		}
		e.sessions = n
		return nil
	})
}

// indexBytesPerSession starts a separate sessions.Index over the loaded bucket and
// returns its retained heap per indexed session: HeapAlloc after GC with the
// index built minus before it. A throwaway index reads the bucket first, so
// the embedded server's block cache for it is warm in both snapshots and
// cancels out.
// It also returns how long that index took to start (load every entry):
// a worker's cold start of its session index.
func (e *env) indexBytesPerSession(ctx context.Context) (float64, time.Duration, error) {
	// over the worker's in-process connection, as the worker loads its
	// own: over the client's TCP one, nats.go's watch of a million entries
	// on two starved cores overflowed its subscription and stalled
	// (docs/scale.md)
	js, err := jetstream.New(e.workerNC)
	if err != nil {
		return 0, 0, err
	}
	store, err := sessions.Open(ctx, js, e.names)
	if err != nil {
		return 0, 0, err
	}
	quiet := slog.New(slog.DiscardHandler)
	e.logf("index memory: loading two more indexes of the bucket (one to warm the server's cache, one measured)")
	warm, err := sessions.StartIndex(ctx, js, store, quiet, handlers.IndexDerive(e.cfg))
	if err != nil {
		return 0, 0, err
	}
	warm.Stop()
	warm = nil
	before := heapAfterGC()
	start := time.Now()
	idx, err := sessions.StartIndex(ctx, js, store, quiet, handlers.IndexDerive(e.cfg))
	took := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	// the trigram lists are built after StartIndex returns: count them
	if err := idx.WaitSearch(ctx); err != nil {
		idx.Stop()
		return 0, 0, err
	}
	after := heapAfterGC()
	n := idx.Len()
	idx.Stop()
	if n == 0 {
		return 0, 0, errors.New("index is empty")
	}
	return round((float64(after)-float64(before))/float64(n), 0), took, nil
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func runList10k(ctx context.Context, e *env) (Result, error) {
	return e.runList(ctx, e.sz.list10k)
}

func runList100k(ctx context.Context, e *env) (Result, error) {
	return e.runList(ctx, e.sz.list100k)
}

// runList calls tool sessions_list {"limit":100} through NATS with a real
// token over n sessions (agent visibility: the page comes from the whole
// inventory, newest first).
func (e *env) runList(ctx context.Context, n int) (Result, error) {
	if err := e.ensureSessions(ctx, n); err != nil {
		return Result{}, err
	}
	bps, took, err := e.indexBytesPerSession(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("index memory: %w", err)
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	params := []byte(`{"limit":100}`)
	first, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
	if err != nil {
		return Result{}, err
	}
	var chk struct {
		Count   int  `json:"count"`
		HasMore bool `json:"hasMore"`
	}
	if err := json.Unmarshal(first, &chk); err != nil || chk.Count != 100 || !chk.HasMore {
		return Result{}, fmt.Errorf("sessions_list reply: count %d hasMore %v (%v): %.300s", chk.Count, chk.HasMore, err, first)
	}
	r, err := measure(ctx, e.sz.list, func() error {
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
		return err
	})
	r.Dataset = fmt.Sprintf("limit 100 of %d sessions, visibility agent", n)
	r.BytesPerSession = f64(bps)
	r.IndexStartMs = f64(round(took.Seconds()*1000, 1))
	r.ReplyBytes = len(first)
	return r, err
}

// runListLabel100k and runListSearch100k filter 100k sessions down to the
// one sub-agent labelled "research task N" (the newest-but-one of the
// inventory's labels, so a walk in updatedAt order finds no early match to
// stop at): by exact label, which has its own index, and by search, a
// substring of key, label, display name, subject or sessionId, whose
// candidates come from the index's trigram lists.
func runListLabel100k(ctx context.Context, e *env) (Result, error) {
	return e.runListFiltered(ctx, e.sz.list100k, "label")
}

func runListSearch100k(ctx context.Context, e *env) (Result, error) {
	return e.runListFiltered(ctx, e.sz.list100k, "search")
}

func (e *env) runListFiltered(ctx context.Context, n int, filter string) (Result, error) {
	if err := e.ensureSessions(ctx, n); err != nil {
		return Result{}, err
	}
	i := n - 1 - (n-1)%10 - 1 // a sub-agent (i % 10 == 9), labelled
	label := listEntry(i, 0).Label
	params, _ := json.Marshal(map[string]any{filter: label, "limit": 100})
	cctx, cancel := opCtx(ctx)
	defer cancel()
	first, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
	if err != nil {
		return Result{}, err
	}
	var chk struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(first, &chk); err != nil || chk.Count != 1 {
		return Result{}, fmt.Errorf("sessions_list %s: count %d (%v), want 1: %.300s", params, chk.Count, err, first)
	}
	r, err := measure(ctx, e.sz.list, func() error {
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
		return err
	})
	r.Dataset = fmt.Sprintf("%s matching 1 of %d sessions, visibility agent", filter, n)
	r.ReplyBytes = len(first)
	return r, err
}
