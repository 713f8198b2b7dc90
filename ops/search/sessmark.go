package search

import "hash/maphash"

// sessMark is what the writer remembers of each session whose facts are in
// the index file: enough to skip an entry whose facts did not change (most
// updates: a turn moves only updatedAt and the counts) and to tell a reset
// (a new sessionId) without keeping the facts themselves, which the file
// holds. A map of whole Session values cost about 190 B a session: 19 MB
// of serve's heap at 100,000 sessions, doubled in its RSS by the GC's
// headroom. Two 64-bit hashes: a collision would skip one rewrite of a
// session's filter facts (channel, kind), with odds of 2^-64 an update.
// The marks are kept by keyMark, not by key, which saves each session's
// key string (another 55 B or so); two keys with one mark would share it,
// with odds of about n²/2^65 (10^-8 at a million sessions), and cost a
// needless rewrite of a session's facts or purge check, or keep the facts
// of one session deleted while no indexer ran.
type sessMark struct {
	facts uint64 // sessionId, channel and kind
	id    uint64 // sessionId; 0 when the entry has none
}

// markSeed is per process: marks are made from the index file at start
// and compared only within the process.
var markSeed = maphash.MakeSeed()

// keyMark is the 64-bit hash of a session key that its mark is kept by.
func keyMark(key string) uint64 { return maphash.String(markSeed, key) }

func markOf(s Session) sessMark {
	var h maphash.Hash
	h.SetSeed(markSeed)
	for _, f := range [...]string{s.SessionID, s.Channel, s.Kind} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	m := sessMark{facts: h.Sum64()}
	if s.SessionID != "" {
		m.id = maphash.String(markSeed, s.SessionID) | 1
	}
	return m
}
