package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// inboundReply is the ingress's answer.
type inboundReply = bus.InboundReply

// liveBuffer is how many live messages may wait for chat to print them; the
// server drops a subscriber that falls further behind, and the reply then
// comes from the ingress's answer.
const liveBuffer = 4096

// chatStream sends m (which carries an idempotency
// key) and prints the turn's text deltas to stdout as they arrive. It
// subscribes to the session's live output first, learns the run id from
// an answer-at-once request, then waits for the outcome with a second
// request with the same key, which starts nothing new. streamed says the
// reply is on stdout, newline included; otherwise the caller prints it.
func chatStream(ctx context.Context, nc *nats.Conn, names bus.Names, token string, m bus.InboundMessage, stdout io.Writer) (res inboundReply, streamed bool, err error) {
	key := m.SessionKey
	live := make(chan *nats.Msg, liveBuffer)
	sub, err := nc.ChanSubscribe(names.Live(bus.EncodeKey(key)), live)
	if err != nil {
		return res, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return res, false, err
	}
	wait := m.TimeoutSeconds
	m.TimeoutSeconds = 0
	if res, err = bus.SendInbound(ctx, nc, names, token, m); err != nil || res.Status != "accepted" {
		return res, false, err
	}
	m.TimeoutSeconds = wait
	type outcome struct {
		res inboundReply
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := bus.SendInbound(ctx, nc, names, token, m)
		done <- outcome{r, err}
	}()
	p := livePrinter{runID: res.RunID, w: stdout}
	for {
		select {
		case m := <-live:
			p.take(m)
		case o := <-done:
			if o.err != nil {
				return o.res, false, o.err
			}
			// what the server sent before its answer is in live once a
			// flush returns: print it before deciding what is missing
			_ = nc.Flush()
			for len(live) > 0 {
				p.take(<-live)
			}
			return o.res, p.finish(o.res), nil
		}
	}
}

// livePrinter prints one run's text deltas.
type livePrinter struct {
	runID string
	w     io.Writer
	text  strings.Builder // what this attempt printed
	seq   uint64
}

func (p *livePrinter) take(m *nats.Msg) {
	var ev bus.LiveEvent
	if json.Unmarshal(m.Data, &ev) != nil || ev.RunID != p.runID {
		return
	}
	if ev.Seq == 1 && p.seq > 0 {
		// a new attempt of the run (its gateway died): it starts over
		if p.text.Len() > 0 {
			fmt.Fprintln(p.w)
		}
		p.text.Reset()
	}
	p.seq = ev.Seq
	if ev.Type == bus.LiveText {
		p.text.WriteString(ev.Delta)
		_, _ = io.WriteString(p.w, ev.Delta)
	}
}

// finish ends the printed reply. When the live output missed some of it
// (a dropped message, a runtime that streams nothing, as exec), the reply
// as the ingress answered it follows on a line of its own.
func (p *livePrinter) finish(res inboundReply) bool {
	if res.Status != "ok" {
		if p.text.Len() > 0 {
			fmt.Fprintln(p.w)
		}
		return false
	}
	if p.text.String() == res.Reply {
		fmt.Fprintln(p.w)
		return true
	}
	if p.text.Len() > 0 {
		fmt.Fprintln(p.w)
	}
	return false
}
