// Package supervise runs a group of child processes the way a service
// manager would on one machine: started one at a time, each waited for
// until it says it is ready, their output prefixed with their name, and
// stopped in reverse order (a signal, a grace period, then a kill of the
// child's whole process group), so nothing is left behind. Supervise
// restarts a child that dies on its own, as Restart=on-failure would.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Proc is one child process.
type Proc struct {
	// Name prefixes every line the process writes ("n1 | ...").
	Name string
	// Path is the program; Args follow it.
	Path string
	Args []string
	// Env is added to this process's environment for the child.
	Env []string
	// Ready is the start of the stdout line that says the process is up.
	Ready string
}

// Group is the running children, in start order.
type Group struct {
	logs   *prefixed
	mu     sync.Mutex
	procs  []*child
	exited chan *child // each child that ended while not being stopped
	grace  time.Duration
	// stopped: Stop has begun, so nothing starts any more
	stopped bool
	// restarts counts the children brought back, by name
	restarts map[string]int
}

// child is one started process.
type child struct {
	Proc
	cmd      *exec.Cmd
	done     chan struct{} // closed once it has exited
	err      error         // its exit, once done
	stopping bool
	started  time.Time
}

// New is an empty group whose children's output goes to logs, each line
// prefixed with the child's name; Stop gives each child grace to exit
// after its stop signal.
func New(logs io.Writer, grace time.Duration) *Group {
	return &Group{logs: &prefixed{w: logs}, exited: make(chan *child, 64), grace: grace, restarts: map[string]int{}}
}

// Start starts p and waits until it prints its ready line. A child that
// exits first, or is not ready within within or before ctx ends, is an
// error (the child, if still running, stays in the group for Stop).
func (g *Group) Start(ctx context.Context, p Proc, within time.Duration) error {
	c, ready, err := g.spawn(p, -1)
	if err != nil {
		return err
	}
	return c.awaitReady(ctx, ready, within)
}

// spawn starts p as a new child: appended to the group (slot < 0) or in
// the place of the one at slot, so the stop order stays the start order.
// A group being stopped starts nothing.
func (g *Group) spawn(p Proc, slot int) (*child, <-chan struct{}, error) {
	ready := make(chan struct{})
	var once sync.Once
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout = g.logs.writer(p.Name, p.Ready, func() { once.Do(func() { close(ready) }) })
	cmd.Stderr = g.logs.writer(p.Name, "", nil)
	cmd.SysProcAttr = groupAttr()
	// a grandchild that keeps the output pipes open must not hold Wait
	cmd.WaitDelay = 5 * time.Second
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil, nil, fmt.Errorf("start %s: the group is stopping", p.Name)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %v", p.Name, err)
	}
	c := &child{Proc: p, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	if slot < 0 {
		g.procs = append(g.procs, c)
	} else {
		g.procs[slot] = c
	}
	go g.wait(c)
	return c, ready, nil
}

// awaitReady waits for c's ready line.
func (c *child) awaitReady(ctx context.Context, ready <-chan struct{}, within time.Duration) error {
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-c.done:
		return fmt.Errorf("%s exited before it was ready: %v (its output above, prefixed %q, says why)", c.Name, describe(c.err), c.Name)
	case <-timer.C:
		return fmt.Errorf("%s printed no %q line within %v (its output above, prefixed %q)", c.Name, c.Ready, within, c.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait reaps c and reports it when nobody asked it to stop.
func (g *Group) wait(c *child) {
	err := c.cmd.Wait()
	g.mu.Lock()
	c.err = err
	stopping := c.stopping
	g.mu.Unlock()
	// what a child left in its process group goes with it, before anyone
	// waiting on the child hears it is gone
	killGroup(c.cmd.Process.Pid)
	close(c.done)
	if !stopping {
		select {
		case g.exited <- c:
		default:
		}
	}
}

// Stop stops every child in reverse start order: the stop signal, up to
// the group's grace to exit, then a kill of its process group. The error
// names each child that did not exit cleanly (status 0 after the signal).
func (g *Group) Stop() error {
	g.mu.Lock()
	g.stopped = true
	procs := append([]*child(nil), g.procs...)
	for _, c := range procs {
		c.stopping = true
	}
	g.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		c := procs[i]
		select {
		case <-c.done:
		default:
			terminate(c.cmd.Process)
			select {
			case <-c.done:
			case <-time.After(g.grace):
				killGroup(c.cmd.Process.Pid)
				_ = c.cmd.Process.Kill()
				<-c.done
				errs = append(errs, fmt.Errorf("%s did not stop within %v: killed", c.Name, g.grace))
				continue
			}
		}
		if c.err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", c.Name, describe(c.err)))
		}
	}
	return errors.Join(errs...)
}

// Pid is the process id of the child called name now, 0 if none.
func (g *Group) Pid(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.procs {
		if c.Name == name {
			return c.cmd.Process.Pid
		}
	}
	return 0
}

// Names lists the children in start order.
func (g *Group) Names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.procs {
		out = append(out, c.Name)
	}
	return out
}

// describe says how a child ended.
func describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exited with " + strings.TrimPrefix(ee.ProcessState.String(), "exit ")
	}
	if err == nil {
		return "exited with status 0"
	}
	return err.Error()
}
