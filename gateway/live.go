package gateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// LiveOutput publishes one attempt of a run's live output on the session's
// live subject (bus.Names.Live): core NATS, fire and forget. A publish only
// hands the message to the connection's write buffer, so a slow or absent
// subscriber never slows the turn (the server drops a subscriber that
// falls behind, not the publisher), and nothing is stored: the transcript
// stays the record of the turn. A redelivered run makes a new LiveOutput,
// whose seq starts again at 1.
type LiveOutput struct {
	nc      *nats.Conn
	subject string
	runID   string
	redact  *sanitize.Redactor
	log     *slog.Logger
	// mu makes seq and the publish one step, so the seq order is the order
	// on the wire even if a runtime emitted from several goroutines
	mu  sync.Mutex
	seq uint64
	// partial is the text the model has streamed since the turn's last
	// tool call: what an aborted turn keeps as its reply
	partial strings.Builder
}

// NewLiveOutput returns the live output of run runID of sessionKey,
// published on nc. redact masks credentials in tool arguments and errors
// (nil: the default patterns).
func NewLiveOutput(nc *nats.Conn, names bus.Names, sessionKey, runID string, redact *sanitize.Redactor, log *slog.Logger) *LiveOutput {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LiveOutput{nc: nc, subject: names.Live(bus.EncodeKey(sessionKey)), runID: runID, redact: redact, log: log}
}

// Emit publishes what a runtime emitted (runtime.Turn.Emit).
func (l *LiveOutput) Emit(e runtime.Event) {
	ev := bus.LiveEvent{Type: e.Type, Delta: e.Delta, Tool: e.Tool}
	switch e.Type {
	case runtime.EventText:
		l.mu.Lock()
		l.partial.WriteString(e.Delta)
		l.mu.Unlock()
	case runtime.EventToolCall:
		l.mu.Lock()
		l.partial.Reset()
		l.mu.Unlock()
		if len(e.Arguments) > 0 {
			args, _ := l.redact.ToolPayload(string(e.Arguments))
			if json.Valid([]byte(args)) {
				ev.Arguments = json.RawMessage(args)
			}
		}
	case runtime.EventToolResult:
		ok := e.OK
		ev.OK = &ok
	}
	l.publish(ev)
}

// Partial is the text streamed since the turn's last tool call.
func (l *LiveOutput) Partial() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.partial.String()
}

// Done ends the attempt with the turn's reply (none for a yielded turn).
func (l *LiveOutput) Done(reply string, replied bool) {
	ev := bus.LiveEvent{Type: bus.LiveDone}
	if replied {
		ev.Reply = &reply
	}
	l.publish(ev)
}

// Fail ends the attempt with the run's error, as the run record shows it.
func (l *LiveOutput) Fail(errText string) {
	l.publish(bus.LiveEvent{Type: bus.LiveError, Error: errText})
}

func (l *LiveOutput) publish(ev bus.LiveEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	ev.RunID, ev.Seq = l.runID, l.seq
	data, err := bus.Marshal(ev)
	if err == nil {
		err = l.nc.Publish(l.subject, data)
	}
	if errors.Is(err, nats.ErrMaxPayload) && ev.Reply != nil {
		// a reply over the server's message size: the end still goes out,
		// and the transcript has the reply
		ev.Reply = nil
		if data, err = bus.Marshal(ev); err == nil {
			err = l.nc.Publish(l.subject, data)
		}
	}
	if err != nil {
		l.log.Debug("gateway: live output not published (the transcript has the turn)", "run", l.runID, "type", ev.Type, "err", err)
	}
}
