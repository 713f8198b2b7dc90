package record

import "sync"

// Echo holds values this process has just written to a bucket that its
// own watch will bring back: the watch's decode of exactly the bytes
// written takes the value instead of decoding them again. Equal bytes
// decode to an equal value, so this changes nothing a reader gets, only
// what it costs: a spawn's session entry and registry record were
// otherwise decoded by the watches of the very worker that had just
// encoded them, while the spawn waited for its writes.
//
// It is bounded: past size values the oldest are dropped (a write whose
// watch is elsewhere, or that failed, is never taken). Only for types
// whose encode and decode round trip exactly (test each one).
type Echo[T any] struct {
	mu   sync.Mutex
	vals map[string]*T // by the bytes written
	ring []string      // the keys of vals in the order put, for the bound
	next int
}

// EchoSize is the bound a store's echo is made with: writes not yet back
// through the watch (a spawn's, a few at a time).
const EchoSize = 256

// NewEcho holds up to size values.
func NewEcho[T any](size int) *Echo[T] {
	return &Echo[T]{vals: make(map[string]*T, size), ring: make([]string, max(size, 1))}
}

// Put remembers v as what data decodes to. v passes to the echo: the
// caller must not use it afterwards (whoever takes it may modify it). A nil
// Echo remembers nothing.
func (e *Echo[T]) Put(data []byte, v *T) {
	if e == nil {
		return
	}
	k := string(data)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := e.ring[e.next]; old != "" {
		delete(e.vals, old)
	}
	e.ring[e.next] = k
	e.next = (e.next + 1) % len(e.ring)
	e.vals[k] = v
}

// Take returns the value put for exactly data, and forgets it; nil when
// there is none.
func (e *Echo[T]) Take(data []byte) *T {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.vals[string(data)]
	if !ok {
		return nil
	}
	delete(e.vals, string(data))
	return v
}
