package gateway

import "sync"

// recent is a bounded map from a session to what this gateway last wrote
// for it (a lane revision, a transcript cursor), so the
// next run of the session here can skip reading it back. Every use is
// guarded by a compare-and-set: a stale value (another replica ran the
// session since) costs one failed write and the read it saved. Values are
// taken out while in use, so two runs never share one.
type recent[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// maxRecent bounds each map; past it the map starts over.
const maxRecent = 1 << 14

func (c *recent[V]) take(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	if ok {
		delete(c.m, key)
	}
	return v, ok
}

func (c *recent[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxRecent {
		c.m = make(map[string]V)
	}
	c.m[key] = v
}
