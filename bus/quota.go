package bus

import (
	"sync"
	"time"
)

// DefaultMaxHeldReplies bounds the 429s one service holds at once
// (Error.Hold): each is a timer and a message, a few hundred bytes. Past it
// a refusal is answered at once, so a caller that does not wait for its
// replies cannot make a worker hold more.
const DefaultMaxHeldReplies = 4096

// heldReplies are the 429s a service holds, each until its timer fires or
// the service stops, whichever comes first.
type heldReplies struct {
	max     int
	mu      sync.Mutex
	pending map[*time.Timer]func(held time.Duration)
}

// refuseOverQuota answers a request its caller's quota refused: at once,
// or, for a caller that came back before its wait was over, when the hold
// the quota set is (or when the service stops). A held reply is one of the
// requests Stop waits for.
func (s *Service) refuseOverQuota(ep *endpoint, start time.Time, reply string, e *Error) {
	h := &s.held
	h.mu.Lock()
	if e.hold <= 0 || reply == "" || len(h.pending) >= h.max {
		h.mu.Unlock()
		s.finish(ep, start, reply, ErrorMsg(e))
		return
	}
	if h.pending == nil {
		h.pending = map[*time.Timer]func(time.Duration){}
	}
	s.wg.Add(1)
	var once sync.Once
	send := func(held time.Duration) {
		once.Do(func() {
			defer s.wg.Done()
			s.finish(ep, start, reply, ErrorMsg(e.heldFor(held)))
		})
	}
	var t *time.Timer
	t = time.AfterFunc(e.hold, func() {
		h.mu.Lock()
		delete(h.pending, t)
		h.mu.Unlock()
		send(e.hold)
	})
	h.pending[t] = send
	h.mu.Unlock()
}

// sendHeld sends every held 429 now (the service stops: nobody would be
// there to send them later).
func (s *Service) sendHeld() {
	h := &s.held
	h.mu.Lock()
	sends := make([]func(time.Duration), 0, len(h.pending))
	for t, send := range h.pending {
		t.Stop()
		sends = append(sends, send)
	}
	clear(h.pending)
	h.mu.Unlock()
	for _, send := range sends {
		send(0) // the wait is still ahead (nearly all of it)
	}
}

// HeldReplies is how many 429s the service holds now.
func (s *Service) HeldReplies() int {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	return len(s.held.pending)
}
