package console

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// The live output of the turns running now, kept from each turn's first
// delta, so a page opened mid-turn shows the turn from its start and not
// from whatever delta comes next. The gateways publish live output with
// core NATS and store none of it; the console follows every session's and
// holds a turn's messages only while it runs: a done or error message
// drops them, a turn that stays silent for liveIdle is dropped too (its
// gateway died; a redelivered attempt starts again at seq 1).

const (
	// liveRunMax bounds what one turn keeps: past it, the turn's newer
	// messages still reach the pages following it, and a page that opens
	// later starts at what was kept, told the rest is cut.
	liveRunMax = 1 << 20
	// liveTotalMax bounds what all turns keep together.
	liveTotalMax = 64 << 20
	liveIdle     = 10 * time.Minute
)

type liveRun struct {
	runID     string
	lines     [][]byte // each one live message as one JSON line
	bytes     int
	truncated bool
	at        time.Time
}

type liveBuffer struct {
	mu    sync.Mutex
	runs  map[string]*liveRun // by session key
	total int
	subs  map[string]map[chan []byte]struct{}
	now   func() time.Time
}

func newLiveBuffer(now func() time.Time) *liveBuffer {
	return &liveBuffer{runs: map[string]*liveRun{}, subs: map[string]map[chan []byte]struct{}{}, now: now}
}

// add takes one live message of session key.
func (b *liveBuffer) add(key string, data []byte) {
	var ev bus.LiveEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	line, _ := json.Marshal(ev)
	b.mu.Lock()
	defer b.mu.Unlock()
	run := b.runs[key]
	if run == nil || run.runID != ev.RunID || ev.Seq == 1 {
		b.drop(key)
		run = &liveRun{runID: ev.RunID}
		b.runs[key] = run
	}
	run.at = b.now()
	if run.bytes+len(line) > liveRunMax || b.total+len(line) > liveTotalMax {
		run.truncated = true
	} else {
		run.lines = append(run.lines, line)
		run.bytes += len(line)
		b.total += len(line)
	}
	for ch := range b.subs[key] {
		select {
		case ch <- line:
		default: // a page that fell this far behind reloads the transcript at the end
		}
	}
	if ev.Type == bus.LiveDone || ev.Type == bus.LiveError {
		b.drop(key)
	}
}

// drop forgets key's turn (mu held).
func (b *liveBuffer) drop(key string) {
	if run := b.runs[key]; run != nil {
		b.total -= run.bytes
		delete(b.runs, key)
	}
}

// subscribe returns what key's running turn has sent so far and a channel
// of what it sends next: taken in one step, so nothing falls between.
func (b *liveBuffer) subscribe(key string) (kept [][]byte, truncated bool, ch chan []byte, cancel func()) {
	ch = make(chan []byte, 1024)
	b.mu.Lock()
	defer b.mu.Unlock()
	if run := b.runs[key]; run != nil {
		kept, truncated = append([][]byte(nil), run.lines...), run.truncated
	}
	if b.subs[key] == nil {
		b.subs[key] = map[chan []byte]struct{}{}
	}
	b.subs[key][ch] = struct{}{}
	return kept, truncated, ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs[key], ch)
		if len(b.subs[key]) == 0 {
			delete(b.subs, key)
		}
	}
}

// sweep drops the turns silent for liveIdle.
func (b *liveBuffer) sweep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	cut := b.now().Add(-liveIdle)
	for key, run := range b.runs {
		if run.at.Before(cut) {
			b.drop(key)
		}
	}
}

// followLive subscribes to every session's live output.
func (s *Server) followLive(wctx context.Context) error {
	prefix := strings.TrimSuffix(s.o.Names.LiveAll(), ">")
	sub, err := s.o.Conn.Subscribe(s.o.Names.LiveAll(), func(m *nats.Msg) {
		s.live.add(decodeKey(strings.TrimPrefix(m.Subject, prefix)), m.Data)
	})
	if err != nil {
		return err
	}
	// a burst of deltas is not dropped for a slow console: it waits in
	// the subscription's buffer up to its limits
	_ = sub.SetPendingLimits(1<<16, 64<<20)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				_ = sub.Unsubscribe()
				return
			case <-t.C:
				s.live.sweep()
			}
		}
	}()
	return nil
}
