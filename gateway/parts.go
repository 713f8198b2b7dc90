package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// A run's parts are the transcript entries it appends itself, the prompt
// and the reply, each tagged with a marker so that a later attempt of the
// same run finds what an earlier one wrote and never writes it twice.

// runMarker tags transcript entries a run appended (handlers hide it).
const runMarker = "__sessionbus"

type marker struct {
	Run  string `json:"run"`
	Part string `json:"part"`
	// Context, on a reply, is the context's size after the turn by the
	// provider's usage (last prompt plus reply): the next turn's estimate
	// starts from it.
	Context int64 `json:"context,omitempty"`
}

// appendPart appends one of the run's own entries at the cursor, with a
// message id the server deduplicates. The compare-and-set fails when the
// end moved: another run's entry (its prompt won the session) or a writer
// that holds none (an import, say). The end is then read again, and unless
// another run holds the session there (mayAppendAfter), moved records the
// new position and the part goes there. The run's first part holds the
// session for it.
func (r *run) appendPart(ctx context.Context, part string, data []byte, moved func(context.Context, uint64) error) error {
	id := r.req.RunID + "." + part
	for attempt := 0; ; attempt++ {
		_, _, err := r.g.tr.AppendAt(ctx, r.cur, id, data)
		if err == nil {
			r.holds = true
			return nil
		}
		if !errors.Is(err, transcripts.ErrConflict) || attempt >= maxAppendMoves {
			return fmt.Errorf("append %s: %w", part, err)
		}
		if r.cur, err = r.g.tr.OpenCursor(ctx, r.enc, true); err != nil {
			return fmt.Errorf("append %s: %w", part, err)
		}
		if err := r.mayAppendAfter(ctx); err != nil {
			return err
		}
		if moved != nil {
			if err := moved(ctx, r.cur.Len()); err != nil {
				return err
			}
		}
	}
}

// maxAppendMoves bounds how often other writers may move a transcript's end
// under one append before the run fails (and is retried).
const maxAppendMoves = 8

// hasPart reports whether entries hold part of runID.
func hasPart(entries []transcripts.Entry, runID, part string) bool {
	_, ok := findPart(entries, runID, part)
	return ok
}

// findPart returns the content of the entry this run appended as part.
func findPart(entries []transcripts.Entry, runID, part string) (string, bool) {
	for _, e := range entries {
		if !strings.Contains(string(e.Data), runMarker) {
			continue
		}
		var m struct {
			M       *marker `json:"__sessionbus"`
			Content any     `json:"content"`
		}
		if json.Unmarshal(e.Data, &m) == nil && m.M != nil && m.M.Run == runID && m.M.Part == part {
			text, _ := m.Content.(string)
			return text, true
		}
	}
	return "", false
}
