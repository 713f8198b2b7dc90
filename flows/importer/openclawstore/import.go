package openclawstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Options tune Import.
type Options struct {
	// Parallel is how many sessions are imported at once (default 8):
	// sessions are independent, and one session's import is a chain of
	// round trips, so a few in flight keep the server busy.
	Parallel int
	// SkipInvalid imports the valid sessions when some entries cannot be
	// imported (their problems are in Summary.Invalid); without it such a
	// store is refused before anything is written.
	SkipInvalid bool
	// Progress, when set, is called about once a second and at the end.
	Progress func(Progress)
}

// Progress is how far an import is.
type Progress struct {
	Sessions, TotalSessions int
	Entries                 int // transcript entries appended so far
	Elapsed                 time.Duration
}

// Problem is one session that cannot be imported, and why.
type Problem struct {
	AgentID string `json:"agentId"`
	Key     string `json:"key"`
	Source  string `json:"source"`
	Error   string `json:"error"`
}

// Summary is what Import did.
type Summary struct {
	Dir      string `json:"dir"`
	Agents   int    `json:"agents"`
	Sessions int    `json:"sessions"`
	// Created counts sessions new to sessionbus; the others existed
	// (an earlier run of the same import) and only gained what their
	// transcript gained since.
	Created int `json:"created"`
	// Imported counts transcript entries appended by this run, Present
	// those an earlier run had already appended.
	Imported int `json:"imported"`
	Present  int `json:"alreadyPresent"`
	// SkippedLines counts transcript lines that are not messages
	// (session headers, model changes) or that OpenClaw's reader would
	// pass over (a torn last line).
	SkippedLines int       `json:"skippedLines"`
	Invalid      []Problem `json:"invalid,omitempty"`
	Failed       []Problem `json:"failed,omitempty"`
	Seconds      float64   `json:"seconds"`
}

// Line is the one-line summary for stderr.
func (s *Summary) Line() string {
	rate := 0.0
	if s.Seconds > 0 {
		rate = float64(s.Imported) / s.Seconds
	}
	line := fmt.Sprintf("imported %d sessions (%d new) from %d agents of %s: %d entries appended, %d already there, in %.1fs (%.0f entries/s)",
		s.Sessions-len(s.Failed), s.Created, s.Agents, s.Dir, s.Imported, s.Present, s.Seconds, rate)
	if n := len(s.Invalid); n > 0 {
		line += fmt.Sprintf("; %d invalid sessions skipped", n)
	}
	if n := len(s.Failed); n > 0 {
		line += fmt.Sprintf("; %d sessions failed (run the same import again to finish them)", n)
	}
	return line
}

// ErrInvalid is returned (wrapped, with the problems) when the store holds
// sessions that cannot be imported and Options.SkipInvalid is not set.
var ErrInvalid = errors.New("the OpenClaw store has sessions that cannot be imported")

// Import loads every session of st into sessionbus: entries with their keys,
// labels, parents, routes and timestamps, and their transcripts. Every entry
// is checked before anything is written. Running it again appends only what
// the OpenClaw transcripts gained since (importer.ImportEntry).
func Import(ctx context.Context, st *Store, store *sessions.Store, tr *transcripts.Store, o Options) (*Summary, error) {
	start := time.Now()
	sum := &Summary{Dir: st.Dir}
	agents := map[string]bool{}
	type job struct {
		s *Session
		e *sessions.Entry
	}
	var jobs []job
	for i := range st.Sessions {
		s := &st.Sessions[i]
		agents[s.AgentID] = true
		e, err := s.SessionEntry()
		if err == nil {
			err = rules.ValidateStoredKey(e.Key)
		}
		if err != nil {
			sum.Invalid = append(sum.Invalid, Problem{AgentID: s.AgentID, Key: s.Key, Source: s.Source, Error: err.Error()})
			continue
		}
		jobs = append(jobs, job{s, e})
	}
	sum.Agents, sum.Sessions = len(agents), len(jobs)
	if len(sum.Invalid) > 0 && !o.SkipInvalid {
		var b strings.Builder
		for i, p := range sum.Invalid {
			if i == 10 {
				fmt.Fprintf(&b, "\n  … and %d more", len(sum.Invalid)-10)
				break
			}
			fmt.Fprintf(&b, "\n  %s (agent %s, %s): %s", p.Key, p.AgentID, p.Source, p.Error)
		}
		return sum, fmt.Errorf("%w; nothing was written (pass --skip-invalid to import the others):%s", ErrInvalid, b.String())
	}

	par := o.Parallel
	if par <= 0 {
		par = 8
	}
	var done, entries atomic.Int64
	var mu sync.Mutex
	report := func() {
		if o.Progress != nil {
			o.Progress(Progress{Sessions: int(done.Load()), TotalSessions: len(jobs), Entries: int(entries.Load()), Elapsed: time.Since(start)})
		}
	}
	stop := make(chan struct{})
	ticker := sync.WaitGroup{}
	if o.Progress != nil {
		ticker.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					report()
				case <-stop:
					return
				}
			}
		})
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for j := range work {
				res, err := importOne(ctx, store, tr, j.s, j.e)
				mu.Lock()
				if err != nil {
					sum.Failed = append(sum.Failed, Problem{AgentID: j.s.AgentID, Key: j.s.Key, Source: j.s.Source, Error: err.Error()})
				} else {
					if res.Created {
						sum.Created++
					}
					sum.Imported += res.Imported
					sum.Present += res.Present
					sum.SkippedLines += res.Skipped
				}
				mu.Unlock()
				if res != nil {
					entries.Add(int64(res.Imported))
				}
				done.Add(1)
			}
		})
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		work <- j
	}
	close(work)
	wg.Wait()
	close(stop)
	ticker.Wait()
	report()
	sum.Seconds = time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("import interrupted after %d of %d sessions (run the same import again to finish): %w", done.Load(), len(jobs), err)
	}
	if len(sum.Failed) > 0 {
		return sum, fmt.Errorf("%d of %d sessions failed, first %s: %s (run the same import again to finish them)", len(sum.Failed), len(jobs), sum.Failed[0].Key, sum.Failed[0].Error)
	}
	return sum, nil
}

func importOne(ctx context.Context, store *sessions.Store, tr *transcripts.Store, s *Session, e *sessions.Entry) (*importer.ImportResult, error) {
	rc, err := s.Transcript()
	if err != nil {
		return nil, fmt.Errorf("open transcript: %w", err)
	}
	defer rc.Close()
	return importer.ImportEntry(ctx, store, tr, e, ImportID(s.AgentID, e.SessionID), rc)
}

// ImportID names one OpenClaw transcript (a session id of an agent), so a
// later run recognises what an earlier one appended, even when the
// transcript has grown since.
func ImportID(agentID, sessionID string) string {
	return "openclaw:" + agentID + ":" + sessionID
}

// SessionEntry converts the OpenClaw store entry: OpenClaw's field names
// are sessionbus's, so it decodes as is, except thread ids that OpenClaw
// may store as numbers (Telegram topics), which become strings. A field
// whose value has a shape sessionbus does not read is left out rather than
// failing the session. createdAt, when absent, is startedAt or updatedAt.
func (s *Session) SessionEntry() (*sessions.Entry, error) {
	var m map[string]any
	if err := json.Unmarshal(s.Entry, &m); err != nil || m == nil {
		return nil, fmt.Errorf("store entry is not a JSON object")
	}
	stringify(m, "lastThreadId")
	for _, k := range []string{"origin", "deliveryContext"} {
		if sub, ok := m[k].(map[string]any); ok {
			stringify(sub, "threadId")
			stringify(sub, "accountId")
			stringify(sub, "to")
		}
	}
	delete(m, "key")
	delete(m, "agentId")
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var e sessions.Entry
	if err := json.Unmarshal(b, &e); err != nil {
		for k, v := range m {
			one, _ := json.Marshal(map[string]any{k: v})
			var probe sessions.Entry
			if json.Unmarshal(one, &probe) != nil {
				delete(m, k)
			}
		}
		b, _ = json.Marshal(m)
		e = sessions.Entry{}
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("store entry: %v", err)
		}
	}
	e.Key, e.AgentID = s.Key, s.AgentID
	if e.SessionID == "" {
		e.SessionID = sessions.NewID()
	}
	if e.CreatedAt == 0 {
		e.CreatedAt = e.StartedAt
		if e.CreatedAt == 0 {
			e.CreatedAt = e.UpdatedAt
		}
	}
	return &e, nil
}

func stringify(m map[string]any, k string) {
	if f, ok := m[k].(float64); ok {
		m[k] = strconv.FormatFloat(f, 'f', -1, 64)
	}
}
