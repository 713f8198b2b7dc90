package gateway

import "sync"

// recent is a bounded map of what this gateway keeps per key between
// deliveries (a queued message's failed attempts). Values are taken out
// while in use, so two deliveries never share one.
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
