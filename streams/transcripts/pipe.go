package transcripts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// A pipe sends many requests (direct gets, publishes) to one reply
// subscription and then collects the replies, so a wave of N requests costs
// one round trip plus the server's work, not N round trips.
//
// Each request gets its own reply subject <inbox>.<id> (one wildcard
// subscription <inbox>.*), so replies are matched by id. Matching by the
// Nats-Sequence header alone is not enough: a direct-get miss answers
// "404 Message Not Found" with no sequence in it.
//
// A pipe is used by one goroutine at a time; Store keeps a small pool.
type pipe struct {
	nc      *nats.Conn
	sub     *nats.Subscription
	ch      chan *nats.Msg
	prefix  string // "<inbox>."
	next    uint64
	broken  bool
	timeout time.Duration // per wave, when the context has no deadline
}

const (
	pipeMaxWindow    = 1024     // most requests in flight (and the reply channel's capacity)
	pipeFirstWindow  = 64       // requests sent before the first reply tells us the reply size
	pipeBudgetBytes  = 16 << 20 // in-flight reply bytes the window aims for
	pipeChanCapacity = pipeMaxWindow + 64
)

func newPipe(nc *nats.Conn, capacity int, timeout time.Duration) (*pipe, error) {
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, capacity)
	sub, err := nc.ChanSubscribe(inbox+".*", ch)
	if err != nil {
		return nil, err
	}
	return &pipe{nc: nc, sub: sub, ch: ch, prefix: inbox + ".", timeout: timeout}, nil
}

func (p *pipe) close() {
	if p.sub != nil {
		_ = p.sub.Unsubscribe()
		p.sub = nil
	}
}

// id returns the request id carried by a reply subject, or false.
func (p *pipe) id(subject string) (uint64, bool) {
	if !strings.HasPrefix(subject, p.prefix) {
		return 0, false
	}
	id, err := strconv.ParseUint(subject[len(p.prefix):], 10, 64)
	return id, err == nil
}

// roundTrip sends every request (their Reply is overwritten) and returns the
// replies in request order. At most a window of requests is in flight; the
// window shrinks when replies are big, so a wave of large entries never piles
// up more than pipeBudgetBytes in the server's outbound buffer for us.
// On any error the pipe is marked broken (late replies may still arrive).
func (p *pipe) roundTrip(ctx context.Context, reqs []*nats.Msg) ([]*nats.Msg, error) {
	n := len(reqs)
	if n == 0 {
		return nil, nil
	}
	if _, ok := ctx.Deadline(); !ok && p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	// Drop anything stale (there should be nothing on a healthy pipe).
	for len(p.ch) > 0 {
		<-p.ch
	}
	base := p.next
	p.next += uint64(n)
	res := make([]*nats.Msg, n)
	var buf [24]byte
	send := func(i int) error {
		m := reqs[i]
		m.Reply = p.prefix + string(strconv.AppendUint(buf[:0], base+uint64(i), 10))
		return p.nc.PublishMsg(m)
	}
	window := min(n, pipeFirstWindow)
	sent, got, inflight, maxSize := 0, 0, 0, 0
	for ; sent < window; sent++ {
		if err := send(sent); err != nil {
			p.broken = true
			return nil, err
		}
		inflight++
	}
	for got < n {
		var m *nats.Msg
		select {
		case m = <-p.ch:
		case <-ctx.Done():
			p.broken = true
			return nil, fmt.Errorf("streams: %d of %d replies after %w", got, n, ctx.Err())
		}
		id, ok := p.id(m.Subject)
		if !ok || id < base || id >= base+uint64(n) || res[id-base] != nil {
			continue // stale or duplicate
		}
		res[id-base] = m
		got++
		inflight--
		if sz := len(m.Data) + len(m.Subject) + 256; sz > maxSize {
			maxSize = sz
		}
		if sent < n {
			window = min(max(pipeBudgetBytes/maxSize, 1), pipeMaxWindow)
			for ; sent < n && inflight < window; sent++ {
				if err := send(sent); err != nil {
					p.broken = true
					return nil, err
				}
				inflight++
			}
		}
	}
	return res, nil
}

// msgStatus is the status code of a header-only control reply ("404", "503"), or "".
func msgStatus(m *nats.Msg) string {
	if m == nil || m.Header == nil {
		return ""
	}
	return m.Header.Get("Status")
}
