package supervise

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Policy is how Supervise brings back a child that died on its own.
type Policy struct {
	// Burst deaths of one child within Window make Supervise give up, as
	// systemd's StartLimitBurst and StartLimitIntervalSec do: a child that
	// cannot stay up is a fault for a person to look at, not to retry
	// forever.
	Burst  int
	Window time.Duration
	// Backoff is the wait before the first restart; it doubles with each
	// further death within Window, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// StartWithin bounds a restarted child's wait for its ready line.
	StartWithin time.Duration
	// Log gets a line for each death and each restart.
	Log *slog.Logger
}

// DefaultPolicy is systemd's defaults for a unit with Restart=on-failure:
// 5 starts within 10 s at most (StartLimitBurst, StartLimitIntervalSec),
// the first restart after 100 ms (RestartSec). The backoff doubles, up to
// 5 s, so a child that dies at once keeps failing fast enough to reach the
// limit, and one that ran a while is back within a second or two.
var DefaultPolicy = Policy{Burst: 5, Window: 10 * time.Second, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, StartWithin: 2 * time.Minute}

// GaveUpError is Supervise's error when a child died Burst times within
// Window.
type GaveUpError struct {
	Name   string
	Deaths int
	Window time.Duration
	Last   string // how it ended the last time
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("%s died %d times within %v (last: %s): giving up on it; its output above, prefixed %q, says why", e.Name, e.Deaths, e.Window, e.Last, e.Name+" | ")
}

// Supervise restarts each child that exits on its own (a crash, a kill),
// after a backoff, in its place in the start order, while the others keep
// running. It returns nil once ctx ends (the children still run: Stop
// them), or a *GaveUpError once a child died p.Burst times within p.Window
// (the restarts under way are abandoned first).
func (g *Group) Supervise(ctx context.Context, p Policy) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	deaths := map[string][]time.Time{}
	gaveUp := make(chan error, 1)
	for {
		var c *child
		select {
		case <-ctx.Done():
			return nil
		case err := <-gaveUp:
			return err
		case c = <-g.exited:
		}
		now := time.Now()
		recent := []time.Time{now}
		for _, t := range deaths[c.Name] {
			if now.Sub(t) < p.Window {
				recent = append(recent, t)
			}
		}
		deaths[c.Name] = recent
		how := describe(c.err)
		if len(recent) >= p.Burst {
			log.Error("process died too often: giving up", "process", c.Name, "exit", how, "deaths", len(recent), "within", p.Window)
			return &GaveUpError{Name: c.Name, Deaths: len(recent), Window: p.Window, Last: how}
		}
		delay := min(p.Backoff<<(len(recent)-1), p.MaxBackoff)
		log.Warn("process died: restarting it", "process", c.Name, "exit", how, "ran", now.Sub(c.started).Round(time.Millisecond),
			"restart_in", delay, "deaths_in_window", len(recent))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.restart(ctx, c, delay, p.StartWithin, log); err != nil && ctx.Err() == nil {
				// a start that fails is a death of its own, counted as one:
				// its exit comes on g.exited as any other's (a child not
				// ready in time is killed, so it does too)
				log.Warn("restart failed", "process", c.Name, "err", err)
			}
		}()
	}
}

// restart waits delay, then starts dead in its place and waits for its
// ready line; a start that does not come ready in time is killed, so its
// exit reaches Supervise as a death.
func (g *Group) restart(ctx context.Context, dead *child, delay, within time.Duration, log *slog.Logger) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(delay):
	}
	g.mu.Lock()
	slot := -1
	for i, c := range g.procs {
		if c == dead {
			slot = i
		}
	}
	g.mu.Unlock()
	if slot < 0 {
		return fmt.Errorf("%s is no longer in the group", dead.Name)
	}
	began := time.Now()
	c, ready, err := g.spawn(dead.Proc, slot)
	if err != nil {
		return err
	}
	if err := c.awaitReady(ctx, ready, within); err != nil {
		if ctx.Err() == nil {
			c.kill()
		}
		return err
	}
	g.mu.Lock()
	g.restarts[c.Name]++
	n := g.restarts[c.Name]
	g.mu.Unlock()
	log.Info("process restarted", "process", c.Name, "pid", c.cmd.Process.Pid, "restarts", n, "ready_after", time.Since(began).Round(time.Millisecond))
	return nil
}

// kill ends c and what it started at once.
func (c *child) kill() {
	killGroup(c.cmd.Process.Pid)
	_ = c.cmd.Process.Kill()
}

// Restarts is how many times each child was brought back (ready again).
func (g *Group) Restarts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.restarts))
	for k, v := range g.restarts {
		out[k] = v
	}
	return out
}
