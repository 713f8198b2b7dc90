package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway"
)

// bytes_per_session_100k: the whole process's memory (embedded server,
// worker, one gateway as serve runs it, bench client) with 100,000
// sessions loaded, then again after sitting idle for Options.Idle: the
// heap per session after a GC, and the RSS. An idle process should stay
// flat (the bar: the two heaps within 10% of each other); the gateway's
// lifecycle sweep runs once a minute meanwhile: it used to read and
// decode every session each pass, which is what made the process grow;
// it now reads the gateway's table of session stamps.

// defaultIdle is the idle period without --idle: long enough for two
// lifecycle sweeps.
const defaultIdle = 2*gateway.LifecycleSweepInterval + 10*time.Second

func runBytesPerSession100k(ctx context.Context, e *env) (Result, error) {
	n := e.sz.list100k
	// the gateway first: its lifecycle sweep runs at start, and the
	// first measurement is of the loaded process, not of that pass
	stop, err := e.startGateways(ctx, 1, "bench-idle-gw", e.cfg, gateway.Options{})
	if err != nil {
		return Result{}, err
	}
	defer stop()
	if err := e.ensureSessions(ctx, n); err != nil {
		return Result{}, err
	}
	// the load's own garbage and the server's caches settle, as they have
	// in a process that loaded its sessions a while ago: a block's message
	// cache expires 10 s after its last read, its per-subject state after
	// 2 minutes (nats-server's filestore defaults); measured 15 s after the
	// load, that state (~10 MB at 100k) was counted as the load's heap and
	// seen to "fall" while idle
	if err := bus.Sleep(ctx, settle(e.o.Quick)); err != nil {
		return Result{}, err
	}
	idle := e.o.Idle
	if idle <= 0 {
		idle = defaultIdle
		if e.o.Quick {
			idle = 2 * time.Second
		}
	}
	heap0, rss0 := memNow()
	if err := writeHeapProfile(e.o.HeapProfile, ".load"); err != nil {
		return Result{}, err
	}
	e.logf("bytes_per_session_100k: %d sessions loaded: heap %.1f MB, RSS %.1f MB; idle for %v", n, mb(heap0), mb(rss0), idle)
	cpu0 := processCPU()
	start := time.Now()
	peak := rss0
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	deadline := time.NewTimer(idle)
	defer deadline.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-t.C:
			r := rssBytes()
			peak = max(peak, r)
			if m := time.Since(start); m.Truncate(time.Minute) != (m - 10*time.Second).Truncate(time.Minute) {
				e.logf("bytes_per_session_100k: idle %v: RSS %.1f MB", m.Round(time.Second), mb(r))
			}
		case <-deadline.C:
			break wait
		}
	}
	rssEnd := rssBytes() // before the GC memNow forces, as a process left alone has it
	peak = max(peak, rssEnd)
	heap1, _ := memNow()
	if err := writeHeapProfile(e.o.HeapProfile, ".idle"); err != nil {
		return Result{}, err
	}
	cpu := processCPU() - cpu0
	// and the idle process still answers as fast: sessions_list's first
	// page (the figures the row's latency columns and ratio give)
	cctx, cancel := opCtx(ctx)
	defer cancel()
	params := []byte(`{"limit":100}`)
	r, err := measure(ctx, e.sz.list, func() error {
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("sessions_list after the idle period: %w", err)
	}
	r2 := Result{
		HeapPerSession:     f64(round(float64(heap0)/float64(n), 1)),
		HeapPerSessionIdle: f64(round(float64(heap1)/float64(n), 1)),
		IdleSeconds:        f64(round(time.Since(start).Seconds(), 1)),
	}
	r.HeapPerSession, r.HeapPerSessionIdle, r.IdleSeconds = r2.HeapPerSession, r2.HeapPerSessionIdle, r2.IdleSeconds
	r.Dataset = fmt.Sprintf("%d sessions (sessions.Sample shapes), worker and one gateway, idle %v; then sessions_list limit 100", n, idle)
	if rss0 > 0 {
		r.RSSMB, r.RSSMBIdle, r.RSSMBPeak = f64(round(mb(rss0), 1)), f64(round(mb(rssEnd), 1)), f64(round(mb(peak), 1))
	}
	if cpu > 0 {
		r.IdleCPUPerMin = f64(round(float64(cpu.Milliseconds())/time.Since(start).Minutes(), 1))
	}
	e.logf("bytes_per_session_100k: after %v idle: heap %.1f MB (%.0f B/session, was %.0f), RSS %.1f MB (peak %.1f, was %.1f)",
		idle, mb(heap1), *r.HeapPerSessionIdle, *r.HeapPerSession, mb(rssEnd), mb(peak), mb(rss0))
	return r, nil
}

// writeHeapProfile writes the heap profile to path+suffix; an empty path
// writes none.
func writeHeapProfile(path, suffix string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path + suffix)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile %s: %w", path+suffix, err)
	}
	return f.Close()
}

func settle(quick bool) time.Duration {
	if quick {
		return 100 * time.Millisecond
	}
	return 2*time.Minute + 15*time.Second
}

// memNow is the live heap after a GC, and the RSS after it. Two GCs: what
// sync.Pools hold (the server pools its buffers, ~25 MB just after the
// load) survives the first in the pools' victim caches, and is not live.
func memNow() (heap, rss uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, rssBytes()
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// rssBytes is this process's resident set (VmRSS), or 0 where /proc is
// not there to tell.
func rssBytes() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
