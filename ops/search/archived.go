package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/rules"
)

// Archived sessions are searched only when a query asks (archived: true):
// their entries left the stream for the archives object store, so the
// stream cannot feed them. The first such query indexes every finished
// archive the index does not hold yet, and drops those deleted since;
// later ones index only what is new. The live path never pays for it.
//
// An archive's entries are stored beside the stream's, under negative
// sequences (an archive's rows are counted down from -1), so one full-text
// table serves both and a live search excludes them with seq > 0.

// syncArchives brings the index's archived rows level with the archives
// store. Each archive lands in one transaction of its own, so a sync cut
// short by ctx keeps what it finished and the next query goes on from
// there; it then answers 503 with how far it got.
func (in *Indexer) syncArchives(ctx context.Context) error {
	in.archMu.Lock()
	defer in.archMu.Unlock()
	if in.archives == nil {
		st, err := archives.Open(ctx, in.o.JS, in.o.Names)
		if err != nil {
			return bus.Errorf(bus.CodeUnavailable, "the archives cannot be searched: %v", err)
		}
		in.archives = st
	}
	all, err := in.archives.List(ctx)
	if err != nil {
		return bus.Errorf(bus.CodeUnavailable, "the archives cannot be searched: %v", err)
	}
	held, err := in.ix.archiveIDs(ctx)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	var todo []*archives.Meta
	for _, m := range all {
		listed[m.ID] = true
		// a pending archive's session may still be (partly) in the
		// stream: it is searched live until its operation is done
		if m.State == archives.StateDone && !held[m.ID] {
			todo = append(todo, m)
		}
	}
	for id := range held {
		if !listed[id] {
			if err := in.ix.dropArchive(ctx, id); err != nil {
				return err
			}
		}
	}
	for i, m := range todo {
		if ctx.Err() != nil {
			return bus.Errorf(bus.CodeUnavailable, "indexing the archives for this search: %d of %d done; search again to go on", i, len(todo))
		}
		rows, err := in.archiveRows(ctx, m)
		if err != nil {
			in.log.Warn("search: archive not indexed", "archive", m.ID, "key", m.Key, "err", err)
			continue // a corrupt archive is not searchable; `archive get` says why
		}
		if err := in.ix.addArchive(ctx, m, rows); err != nil {
			return err
		}
	}
	return nil
}

// archiveRows reads one archive's entries as index rows, with the same
// choice of entries and redaction as the stream's.
func (in *Indexer) archiveRows(ctx context.Context, m *archives.Meta) ([]Row, error) {
	var buf bytes.Buffer
	if _, err := in.archives.Read(ctx, m.ID, &buf); err != nil {
		return nil, err
	}
	agent := rules.AgentIDFromKey(m.Key)
	var rows []Row
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for n := uint64(0); sc.Scan(); n++ {
		who, text, ok := handlers.SearchText(in.o.Redactor, sc.Bytes(), in.o.WithTools)
		if !ok {
			continue
		}
		rows = append(rows, Row{Key: m.Key, Agent: agent, N: n, Role: who, TS: entryTime(sc.Bytes(), m.At), Text: text})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read archive %s: %w", m.ID, err)
	}
	return rows, nil
}

// entryTime is an entry's own timestamp (unix ms), else fallback.
func entryTime(line []byte, fallback int64) int64 {
	var e struct {
		Timestamp json.Number `json:"timestamp"`
	}
	if json.Unmarshal(line, &e) == nil {
		if ms, err := e.Timestamp.Int64(); err == nil && ms > 0 {
			return ms
		}
	}
	return fallback
}
