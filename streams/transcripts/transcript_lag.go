package transcripts

// A run appends two entries a turn (its prompt and its reply), and moving
// the index head after each turn was one synced write of a send's eight.
// So a writer appending through a Cursor lets the head lag the stream by
// up to half a chunk (Cursor.FlushDue) and moves it once per many turns.
// What makes the lag free for readers: every entry appended while the head
// lags lists, in its Sb-Unindexed header, where the head stood and the
// sequences of the entries between the head and itself. Every read already
// fetches the newest entry beside the head (the probe), so a reader
// extends the head by that list in memory: no walk back, no write, no
// extra wave. Sealed chunks are written only when the head moves, so a
// head extended in memory is used only while it needs no chunk that the
// stored head has not written (the lag crosses at most one chunk edge);
// past that, or on any inconsistency, the reader repairs as before.

import (
	"slices"
	"strconv"
	"strings"
)

// hdrUnindexed is "<count>:<last>:<s1>,<d2>,<d3>...": the stored head the
// writer extended held count entries, the last at stream seq last; entries
// count, count+1, ... up to the one before this message are at s1,
// s1+d2, s1+d2+d3, ... (deltas keep the header short on a busy stream).
const hdrUnindexed = "Sb-Unindexed"

// flushLag is how many entries a writer's cursor leaves out of the stored
// head before FlushDue asks for a flush: a lag under one chunk keeps every
// head a reader extends in memory within one chunk edge of the stored one.
const flushLag = ChunkSize / 2

func encodeUnindexed(count, last uint64, seqs []uint64) string {
	b := make([]byte, 0, 24+len(seqs)*6)
	b = strconv.AppendUint(b, count, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, last, 10)
	b = append(b, ':')
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
			s -= seqs[i-1]
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return string(b)
}

// parseUnindexed decodes hdrUnindexed; ok is false for anything malformed,
// which a reader treats as no list (and repairs as before).
func parseUnindexed(v string) (count, last uint64, seqs []uint64, ok bool) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return 0, 0, nil, false
	}
	var err error
	if count, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return 0, 0, nil, false
	}
	if last, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return 0, 0, nil, false
	}
	fields := strings.Split(parts[2], ",")
	if len(fields) > ChunkSize {
		return 0, 0, nil, false
	}
	seqs = make([]uint64, len(fields))
	for i, f := range fields {
		d, err := strconv.ParseUint(f, 10, 64)
		if err != nil || (i > 0 && d == 0) {
			return 0, 0, nil, false
		}
		if i > 0 {
			d += seqs[i-1]
		}
		seqs[i] = d
	}
	return count, last, seqs, seqs[0] > last
}

// virtualHead returns h extended in memory to top, the session's newest
// entry, by top's Sb-Unindexed list, or nil when the list does not apply:
// none, malformed, not continuing h, or reaching past one chunk edge.
func virtualHead(h *head, top *rawEntry) *head {
	if h.bad || h.stored != nil || top == nil || top.unindexed == "" {
		return nil
	}
	count, last, seqs, ok := parseUnindexed(top.unindexed)
	if !ok || top.n != count+uint64(len(seqs)) || seqs[len(seqs)-1] >= top.seq {
		return nil
	}
	switch {
	case h.Count == count:
		if h.Last != last {
			return nil
		}
	case h.Count > count && h.Count <= top.n:
		if seqs[h.Count-1-count] != h.Last {
			return nil
		}
	default:
		return nil
	}
	if (top.n+1)/ChunkSize > h.Count/ChunkSize+1 {
		return nil // the chunk between would have to be read from the index
	}
	gap := append(slices.Clone(seqs[h.Count-count:]), top.seq)
	v, _ := h.extend(gap)
	v.stored, v.unindexed = h, gap
	return v
}

// consistent reports a head that agrees with the session's newest entry.
func consistent(h *head, top *rawEntry) bool {
	if h.bad {
		return false
	}
	if top == nil {
		return h.Count == 0
	}
	return h.Count > 0 && top.seq == h.Last && top.n == h.Count-1
}

// unwrap returns the stored head under h and the entries past it (h itself
// and none when h is as stored). A writer moves the stored head: the chunks
// a head extended in memory seals were never written.
func (h *head) unwrap() (*head, []uint64) {
	if h.stored == nil {
		return h, nil
	}
	return h.stored, h.unindexed
}

// Lag is how many of the cursor's entries the stored index head lacks.
func (c *Cursor) Lag() int {
	_, gap := c.h.unwrap()
	return len(gap) + len(c.seqs)
}

// FlushDue reports whether the cursor's writer should move the index head
// now (Flush) rather than leave it lagging for a later turn.
func (c *Cursor) FlushDue() bool { return c.Lag() >= flushLag }

// unindexedHeader is the Sb-Unindexed value the cursor's next entry
// carries, or "" when the stored head has every entry before it.
func (c *Cursor) unindexedHeader() string {
	stored, gap := c.h.unwrap()
	if len(gap)+len(c.seqs) == 0 {
		return ""
	}
	return encodeUnindexed(stored.Count, stored.Last, append(slices.Clone(gap), c.seqs...))
}
