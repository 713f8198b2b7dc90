// Package replay reads one session's history for `sessionbus replay`: its
// transcript (SB_TRANSCRIPTS), its runs (the runs bucket) and its signal
// log (SB_SIGNALS), merged in time order, and optionally follows them.
// It only reads.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// Sources of an Event.
const (
	SourceTranscript = "transcript"
	SourceRun        = "run"
	SourceSignal     = "signal"
)

// textMax bounds an event's one-line text; Data has the whole.
const textMax = 160

// Event is one line of a session's history.
type Event struct {
	Time   time.Time `json:"time"`
	Source string    `json:"source"`
	// Seq is the stream sequence of a transcript entry or signal event.
	Seq uint64 `json:"seq,omitempty"`
	// Entry is a transcript entry's number in the session (from 0).
	Entry *uint64 `json:"entry,omitempty"`
	RunID string  `json:"runId,omitempty"`
	// Kind is a transcript entry's role, a run's step (created, started,
	// or its final status) or a signal event's kind.
	Kind string `json:"kind"`
	Text string `json:"text"`
	// Data is the entry, run record or event as stored.
	Data json.RawMessage `json:"data,omitempty"`
}

// Line is the event as one line of text.
func (e Event) Line() string {
	what := e.Source
	switch e.Source {
	case SourceTranscript:
		if e.Entry != nil {
			what += " #" + strconv.FormatUint(*e.Entry, 10)
		}
	case SourceRun:
		what += " " + e.RunID
	case SourceSignal:
		what += " #" + strconv.FormatUint(e.Seq, 10)
	}
	return fmt.Sprintf("%s  %s  %s  %s", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), what, e.Kind, e.Text)
}

// Replayer reads one session.
type Replayer struct {
	js    jetstream.JetStream
	names bus.Names
	key   string
	enc   string

	// what the history read left open, for Follow
	tr, sig   jetstream.MessagesContext
	runsWatch jetstream.KeyWatcher
	runSteps  map[string]string // run id -> last status shown
}

// New prepares a replay of key.
func New(js jetstream.JetStream, names bus.Names, key string) (*Replayer, error) {
	enc := bus.EncodeKey(key)
	if _, err := bus.DecodeKey(enc); err != nil || key == "" {
		return nil, fmt.Errorf("session key %q cannot be replayed: %v; pass a key such as agent:main:main", key, err)
	}
	return &Replayer{js: js, names: names, key: key, enc: enc, runSteps: map[string]string{}}, nil
}

// History is everything stored about the session now, in time order.
// With keep, what it opened stays open for Follow; call Close after.
func (r *Replayer) History(ctx context.Context, keep bool) ([]Event, error) {
	var out []Event
	tr, err := r.readStream(ctx, r.names.TranscriptsStream(), r.names.Transcript(r.enc), transcriptEvent, &out, keep)
	if err != nil {
		return nil, err
	}
	sig, err := r.readStream(ctx, r.names.SignalsStream(), r.names.Signal(r.enc), signalEvent, &out, keep)
	if err != nil {
		if tr != nil {
			tr.Stop()
		}
		return nil, err
	}
	r.tr, r.sig = tr, sig
	if err := r.readRuns(ctx, &out, keep); err != nil {
		r.Close()
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Follow calls emit with each event stored after History, in arrival
// order, until ctx ends. History must have been called with keep.
func (r *Replayer) Follow(ctx context.Context, emit func(Event)) error {
	events := make(chan Event, 64)
	pump := func(it jetstream.MessagesContext, conv func(jetstream.Msg) (Event, bool)) {
		if it == nil {
			return
		}
		go func() {
			for {
				m, err := it.Next()
				if err != nil {
					return // stopped
				}
				if ev, ok := conv(m); ok {
					select {
					case events <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	pump(r.tr, transcriptEvent)
	pump(r.sig, signalEvent)
	var updates <-chan jetstream.KeyValueEntry
	if r.runsWatch != nil {
		updates = r.runsWatch.Updates()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			emit(ev)
		case e, ok := <-updates:
			if !ok {
				updates = nil
				continue
			}
			if e == nil {
				continue
			}
			for _, ev := range r.runEvents(e) {
				emit(ev)
			}
		}
	}
}

// Close stops what History kept open.
func (r *Replayer) Close() {
	if r.tr != nil {
		r.tr.Stop()
	}
	if r.sig != nil {
		r.sig.Stop()
	}
	if r.runsWatch != nil {
		_ = r.runsWatch.Stop()
	}
}

// readStream appends every message of subject in stream to out; with keep
// it returns the iterator, positioned after them, for Follow. A stream
// not yet created has no messages (and nothing to follow).
func (r *Replayer) readStream(ctx context.Context, stream, subject string, conv func(jetstream.Msg) (Event, bool), out *[]Event, keep bool) (jetstream.MessagesContext, error) {
	st, err := r.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	var lastSeq uint64
	last, err := st.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		if !keep {
			return nil, nil
		}
	case err != nil:
		return nil, fmt.Errorf("last message on %s: %w", subject, err)
	default:
		lastSeq = last.Sequence
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	for lastSeq > 0 {
		m, err := nextWithin(ctx, it)
		if err != nil {
			it.Stop()
			return nil, fmt.Errorf("read %s: %w", subject, err)
		}
		if ev, ok := conv(m); ok {
			*out = append(*out, ev)
		}
		if md, err := m.Metadata(); err != nil || md.Sequence.Stream >= lastSeq {
			break
		}
	}
	if !keep {
		it.Stop()
		return nil, nil
	}
	return it, nil
}

// nextWithin is it.Next, given up when ctx ends.
func nextWithin(ctx context.Context, it jetstream.MessagesContext) (jetstream.Msg, error) {
	type res struct {
		m   jetstream.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := it.Next()
		ch <- res{m, err}
	}()
	select {
	case x := <-ch:
		return x.m, x.err
	case <-ctx.Done():
		it.Stop() // ends the Next above
		return nil, ctx.Err()
	}
}

// readRuns appends the steps of the session's runs; with keep the watch
// stays open for Follow. The runs bucket is keyed by run id, so every
// record is read and those of other sessions skipped.
func (r *Replayer) readRuns(ctx context.Context, out *[]Event, keep bool) error {
	kv, err := r.js.KeyValue(ctx, r.names.RunsBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", r.names.RunsBucket(), err)
	}
	// The watch outlives ctx when it is kept: Follow reads it, Close
	// stops it.
	wctx := ctx
	if keep {
		wctx = context.WithoutCancel(ctx)
	}
	w, err := kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", r.names.RunsBucket(), err)
	}
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return ctx.Err()
		case e = <-w.Updates():
		}
		if e == nil {
			break // every current record was delivered
		}
		*out = append(*out, r.runEvents(e)...)
	}
	if keep {
		r.runsWatch = w
	} else {
		_ = w.Stop()
	}
	return nil
}

// runEvents are the steps of a run record not shown yet: created,
// started, and its final status.
func (r *Replayer) runEvents(e jetstream.KeyValueEntry) []Event {
	var rec runs.Record
	if json.Unmarshal(e.Value(), &rec) != nil || rec.RunID == "" || rec.SessionKey != r.key {
		return nil
	}
	order := map[string]int{"": 0, "created": 1, "started": 2, "ended": 3}
	shown := r.runSteps[rec.RunID]
	var out []Event
	step := func(name string, at int64, kind, text string) {
		if at == 0 || order[name] <= order[shown] {
			return
		}
		out = append(out, Event{Time: time.UnixMilli(at), Source: SourceRun, RunID: rec.RunID, Kind: kind, Text: text, Data: e.Value()})
		shown = name
	}
	step("created", rec.CreatedAt, "created", "agent "+rec.AgentID)
	step("started", rec.StartedAt, "started", fmt.Sprintf("gateway %s, attempt %d", rec.Gateway, rec.Attempts))
	if rec.Terminal() {
		text := rec.Reply
		if rec.Error != "" {
			text = rec.Error
		}
		step("ended", rec.EndedAt, rec.Status, oneLine(text))
	}
	r.runSteps[rec.RunID] = shown
	return out
}

func transcriptEvent(m jetstream.Msg) (Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return Event{}, false
	}
	ev := Event{Time: md.Timestamp, Source: SourceTranscript, Seq: md.Sequence.Stream, Data: json.RawMessage(m.Data())}
	if n, err := strconv.ParseUint(m.Headers().Get("Sb-Entry"), 10, 64); err == nil {
		ev.Entry = &n
	}
	var entry struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(m.Data(), &entry) != nil {
		ev.Kind, ev.Text = "?", oneLine(string(m.Data()))
		return ev, true
	}
	ev.Kind, ev.Text = entry.Role, oneLine(contentText(entry.Content))
	return ev, true
}

// contentText is a message's text: a string, or the text parts of an
// array of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Text != "" {
				if b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(p.Text)
			} else if p.Type != "" {
				b.WriteString("[" + p.Type + "]")
			}
		}
		return b.String()
	}
	return string(raw)
}

func signalEvent(m jetstream.Msg) (Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return Event{}, false
	}
	var ev struct {
		Kind      string `json:"kind"`
		RunID     string `json:"runId"`
		Summary   string `json:"summary"`
		ActorType string `json:"actorType"`
	}
	_ = json.Unmarshal(m.Data(), &ev)
	text := ev.Summary
	if ev.ActorType != "" {
		text = "(" + ev.ActorType + ") " + text
	}
	return Event{Time: md.Timestamp, Source: SourceSignal, Seq: md.Sequence.Stream, RunID: ev.RunID, Kind: ev.Kind,
		Text: oneLine(text), Data: json.RawMessage(m.Data())}, true
}

// oneLine folds whitespace and cuts s to textMax bytes (on a rune).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= textMax {
		return s
	}
	cut := textMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Write prints events, one line each, or one JSON object per line.
func Write(w io.Writer, events []Event, asJSON bool) error {
	for _, ev := range events {
		var err error
		if asJSON {
			var b []byte
			b, err = json.Marshal(ev)
			if err == nil {
				_, err = fmt.Fprintln(w, string(b))
			}
		} else {
			_, err = fmt.Fprintln(w, ev.Line())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
