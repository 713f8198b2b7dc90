package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// lockedBuffer is a log sink a test reads while a gateway writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSweepRunsMaintenanceOnce: two gateways' lifecycle sweeps share the
// maintenance lease; the one that holds it prunes exactly the entries past
// pruneAfter (default 30d), each once (in enforce mode), and the other prunes nothing.
func TestSweepRunsMaintenanceOnce(t *testing.T) {
	e := newEnv(t)
	e.cfg.Session.Maintenance.Mode = config.MaintenanceEnforce // the default, warn, changes nothing
	ctx := context.Background()
	store, err := sessions.Open(ctx, e.js, e.names)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ages := map[string]time.Duration{"agent:main:stale1": 40 * 24 * time.Hour, "agent:main:stale2": 31 * 24 * time.Hour, "agent:main:fresh": time.Hour}
	for k, age := range ages {
		at := now.Add(-age).UnixMilli()
		if _, err := store.Create(ctx, &sessions.Entry{Key: k, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	logs := []*lockedBuffer{{}, {}}
	for i, id := range []string{"gw-m1", "gw-m2"} {
		nc, _ := bustest.Connect(t, e.srv)
		g, err := StartWithOptions(ctx, nc, e.cfg, e.op, id, slog.New(slog.NewTextHandler(logs[i], nil)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Stop)
	}
	gone := func(k string) bool {
		_, _, err := store.Get(ctx, k)
		return errors.Is(err, sessions.ErrNotFound)
	}
	counts := func() (c [2]int) {
		for i, l := range logs {
			c[i] = strings.Count(l.String(), `msg="session maintenance: prune"`)
		}
		return c
	}
	// the pass logs each prune after its delete: wait for the lines
	bustest.WaitFor(t, 30*time.Second, "stale entries pruned", func() bool {
		c := counts()
		return gone("agent:main:stale1") && gone("agent:main:stale2") && c[0]+c[1] >= 2
	})
	if gone("agent:main:fresh") {
		t.Fatal("a fresh entry was pruned")
	}
	if c := counts(); c[0]+c[1] != 2 || (c[0] != 0 && c[1] != 0) {
		t.Fatalf("prune lines per gateway %v, want 2 from one gateway:\n%s\n%s", c, logs[0], logs[1])
	}
}
