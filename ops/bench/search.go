package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/ops/search"
)

// searchPhrases are phrases of the interleaved load's messages: each
// matches an eighth of its entries, so a page of 25 is always full and
// the index, not the result set, decides the time.
var searchPhrases = []string{"nightly export failed", "staging key", "row counts per table", "vacuum job", "lifecycle rule"}

// searchIndexFile is the bench's index, shared by search_1m and
// index_lag (the second starts from what the first built).
func (e *env) searchIndexFile() string { return filepath.Join(e.dir, "search", "index.db") }

// startIndexer starts an indexer on the worker's connection and waits
// until it has indexed the whole stream; it returns how long that took
// and the entries it indexed.
func (e *env) startIndexer(ctx context.Context, rebuild bool, observe func(time.Duration)) (*search.Indexer, *search.Service, time.Duration, int64, error) {
	js, err := jetstream.New(e.workerNC)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	t0 := time.Now()
	in, err := search.Start(ctx, search.Options{NC: e.workerNC, JS: js, Names: e.names, Path: e.searchIndexFile(), Rebuild: rebuild, Observe: observe, Refresh: 100 * time.Millisecond})
	if err != nil {
		return nil, nil, 0, 0, err
	}
	for {
		st := in.Status()
		if st.State == search.StateReady && st.Lag == 0 {
			break
		}
		if st.State == search.StateStopped {
			in.Close()
			return nil, nil, 0, 0, fmt.Errorf("indexer stopped: %s", st.Error)
		}
		select {
		case <-ctx.Done():
			in.Close()
			return nil, nil, 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(t0)
	svc, err := search.Serve(e.workerNC, in)
	if err != nil {
		in.Close()
		return nil, nil, 0, 0, err
	}
	return in, svc, took, in.Status().Entries, nil
}

// search_1m: a phrase query, top 25 newest first, over the interleaved
// load (10,000 sessions x 100 entries: a million), asked over NATS as
// `sessionbus search` asks it. The index is rebuilt from the stream
// first: rebuild_entries_per_sec, and index_bytes_per_entry on disk.
func runSearch1M(ctx context.Context, e *env) (Result, error) {
	inter, err := e.ensureInterleaved(ctx)
	if err != nil {
		return Result{}, err
	}
	in, svc, took, n, err := e.startIndexer(ctx, true, nil)
	if err != nil {
		return Result{}, err
	}
	defer in.Close()
	defer svc.Stop()
	count, err := in.Index().Count(ctx)
	if err != nil {
		return Result{}, err
	}
	perSec := round(float64(n)/took.Seconds(), 0)
	perEntry := round(float64(in.Index().Bytes())/float64(max(count, 1)), 1)
	e.logf("search_1m: rebuilt %d entries (%d indexed) in %v (%.0f/s), %.1f B per entry", n, count, took.Round(time.Millisecond), perSec, perEntry)
	i := 0
	r, err := measure(ctx, e.sz.list, func() error {
		c, cancel := opCtx(ctx)
		defer cancel()
		res, err := search.Ask(c, e.nc, e.names, &search.Query{Text: searchPhrases[i%len(searchPhrases)]})
		i++
		if err != nil {
			return err
		}
		if len(res.Results) != search.MaxResults {
			return fmt.Errorf("%q: %d hits, want a full page of %d (index %+v)", searchPhrases[(i-1)%len(searchPhrases)], len(res.Results), search.MaxResults, res.Index)
		}
		return nil
	})
	r.Dataset = fmt.Sprintf("%s; phrase, top %d newest first; index %.1f B/entry, rebuilt at %.0f entries/s", inter.dataset, search.MaxResults, perEntry, perSec)
	r.IndexBytesPerEntry, r.RebuildPerSec = f64(perEntry), f64(perSec)
	return r, err
}

// index_lag: send_concurrent's load (32 senders, 2 gateways) while an
// indexer follows the stream; P50 and P99 are, per transcript entry the
// load writes, the time from the stream storing it to the index
// committing it.
func runIndexLag(ctx context.Context, e *env) (Result, error) {
	var mu sync.Mutex
	var lags []time.Duration
	on := false
	in, svc, _, _, err := e.startIndexer(ctx, false, func(d time.Duration) {
		mu.Lock()
		if on {
			lags = append(lags, d)
		}
		mu.Unlock()
	})
	if err != nil {
		return Result{}, err
	}
	defer in.Close()
	defer svc.Stop()
	mu.Lock()
	on = true
	mu.Unlock()
	r, err := e.runSendThroughput(ctx, "index_lag", 2, 0)
	if err != nil {
		return r, err
	}
	// the last entries' commits
	deadline := time.Now().Add(10 * time.Second)
	for in.Status().Lag > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // a bench polls; no test waits on it
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lags) == 0 {
		return r, fmt.Errorf("the load indexed no entry")
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	sends := r.P50
	r.P50, r.P99 = int64(percentile(lags, 0.5)), int64(percentile(lags, 0.99))
	r.Dataset = fmt.Sprintf("%d entries indexed under send_concurrent's load (%s; send p50 %v)", len(lags), r.Dataset, time.Duration(sends).Round(time.Microsecond))
	return r, nil
}
