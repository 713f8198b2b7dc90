package handlers

import (
	"context"
	"encoding/json"
	"hash/maphash"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// usageTailEntries is how many of the newest transcript entries
// session_status searches for a usage record: the latest assistant turn's
// usage sits among the last few entries (its tool calls and results follow).
const usageTailEntries = 20

// usage is a session's token and cache counters, from its store entry and,
// where the entry is sparse, from the latest transcript usage record.
type usage struct {
	input, output, total, cacheRead, cacheWrite int64
	cost                                        float64
	hasCost                                     bool
}

func entryUsage(e *sessions.Entry) usage {
	return usage{input: e.InputTokens, output: e.OutputTokens, total: e.TotalTokens,
		cacheRead: e.Rares().CacheRead, cacheWrite: e.Rares().CacheWrite}
}

// sparse reports missing token counters. Zero cache counters alone do not
// count: most sessions have none, and each would cost a transcript read.
func (u usage) sparse() bool { return u.input == 0 || u.output == 0 || u.total == 0 }

// backfill fills the counters u lacks from the transcript's usage l.
func (u usage) backfill(l usage) usage {
	fill := func(dst *int64, v int64) {
		if *dst == 0 {
			*dst = v
		}
	}
	fill(&u.input, l.input)
	fill(&u.output, l.output)
	fill(&u.cacheRead, l.cacheRead)
	fill(&u.cacheWrite, l.cacheWrite)
	if l.total == 0 {
		l.total = l.input + l.output + l.cacheRead + l.cacheWrite
	}
	fill(&u.total, l.total)
	if !u.hasCost {
		u.cost, u.hasCost = l.cost, l.hasCost
	}
	return u
}

// latestUsage reads the newest usage record among the transcript's last
// entries; zero when there is none or the read fails (the card then shows
// what the entry has).
//
// A transcript changes only by appends (each a new, higher stream
// sequence) and deletes (the subject purged), so the worker remembers, per
// session, the answer it found and the newest entry it found it under: a
// repeated card reads that entry alone (one direct get, not the index) and,
// while it is the same one, answers the same usage. Any write since, from
// any worker, makes the newest entry a different one, or none.
//
// also, when set, is a read of the caller's own sent in the same wave as
// the newest entry's; its reply is returned, or the wave's error.
func (d *Deps) latestUsage(ctx context.Context, key string, also *nats.Msg) (usage, *nats.Msg, error) {
	var more []*nats.Msg
	if also != nil {
		more = append(more, also)
	}
	gen := d.Transcripts.Generation()
	top, found, replies, err := d.Transcripts.Newest(ctx, bus.EncodeKey(key), more...)
	var reply *nats.Msg
	if also != nil {
		if replies == nil {
			return usage{}, nil, err
		}
		reply = replies[0]
	}
	if err != nil {
		d.Log.Warn("session_status: transcript usage", "session", key, "err", err)
		return usage{}, reply, nil
	}
	if !found {
		return usage{}, reply, nil
	}
	mark := newUsageTop(gen, top)
	if d.usageTops != nil {
		if m, ok := d.usageTops.Get(key); ok && m.sameEntry(mark) {
			return m.u, reply, nil
		}
	}
	u, ok := parseUsage(top.Data) // the newest entry is the latest usage record: no tail to read
	if !ok {
		var last transcripts.Entry
		u, last, ok = d.latestUsageTail(ctx, key)
		// kept only when the tail read ended at the entry just seen:
		// nothing was appended in between, so u is the answer for it
		ok = ok && last.Seq == top.Seq && last.N == top.N
	}
	if ok && d.usageTops != nil {
		mark.u = u
		d.usageTops.Add(key, mark)
	}
	return u, reply, nil
}

// usageTop is the usage latestUsage found for a transcript whose newest
// entry was the one named: stream generation, sequence, entry number,
// length and a hash of its bytes (a stream recreated before this process
// counted a new generation restarts its sequences: the bytes tell).
type usageTop struct {
	gen, seq, n uint64
	size        int
	sum         uint64
	u           usage
}

// usageTopSeed hashes the newest entries latestUsage compares.
var usageTopSeed = maphash.MakeSeed()

func newUsageTop(gen uint64, e transcripts.Entry) usageTop {
	return usageTop{gen: gen, seq: e.Seq, n: e.N, size: len(e.Data), sum: maphash.Bytes(usageTopSeed, e.Data)}
}

func (a usageTop) sameEntry(b usageTop) bool {
	return a.gen == b.gen && a.seq == b.seq && a.n == b.n && a.size == b.size && a.sum == b.sum
}

// usageTopEntries bounds the sessions whose latest usage a worker keeps
// (about 150 bytes each with the key).
const usageTopEntries = 16 << 10

// latestUsageTail reads the usage from the transcript's last entries
// through the index. ok is false when the read failed; last is the newest
// entry read (zero for an empty transcript).
//
// What an entry holds never changes, so the worker remembers what each one
// it parsed said (by stream generation and sequence, like the history
// views): the entries it parsed before are not fetched again.
func (d *Deps) latestUsageTail(ctx context.Context, key string) (u usage, last transcripts.Entry, ok bool) {
	gen := d.Transcripts.Generation()
	known := func(seq, _ uint64) bool { return d.usageSeen != nil && d.usageSeen.Contains(usageKey{gen, seq}) }
	es, _, err := d.Transcripts.TailCached(ctx, bus.EncodeKey(key), usageTailEntries, 0, known)
	if err != nil {
		d.Log.Warn("session_status: transcript usage", "session", key, "err", err)
		return usage{}, transcripts.Entry{}, false
	}
	if len(es) > 0 {
		last = transcripts.Entry{N: es[len(es)-1].N, Seq: es[len(es)-1].Seq}
	}
	// every entry fetched is parsed and remembered, the ones older than
	// the usage record found too: else they would be fetched on every read
	var found *usageSeen
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Data == nil {
			if found != nil {
				continue
			}
			u, ok := d.usageSeen.Get(usageKey{gen, es[i].Seq})
			if !ok {
				// evicted since the read trusted it: read it all again
				return d.latestUsageUncached(ctx, key), last, false
			}
			if u.ok {
				found = &u
			}
			continue
		}
		var u usageSeen
		u.u, u.ok = parseUsage(es[i].Data)
		if d.usageSeen != nil {
			d.usageSeen.Add(usageKey{gen, es[i].Seq}, u)
		}
		if u.ok && found == nil {
			found = &u
		}
	}
	if found == nil {
		return usage{}, last, true
	}
	return found.u, last, true
}

// latestUsageUncached is latestUsage fetching every entry.
func (d *Deps) latestUsageUncached(ctx context.Context, key string) usage {
	es, _, err := d.Transcripts.Tail(ctx, bus.EncodeKey(key), usageTailEntries, 0)
	if err != nil {
		d.Log.Warn("session_status: transcript usage", "session", key, "err", err)
		return usage{}
	}
	for i := len(es) - 1; i >= 0; i-- {
		if u, ok := parseUsage(es[i].Data); ok {
			return u
		}
	}
	return usage{}
}

// usageKey names one transcript entry: stream generation and sequence.
type usageKey struct{ gen, seq uint64 }

// usageSeen is what one entry said about usage.
type usageSeen struct {
	u  usage
	ok bool
}

// usageCacheEntries bounds the entries whose usage parse a worker keeps
// (about 100 bytes each).
const usageCacheEntries = 64 << 10

// parseUsage reads a transcript line's usage: OpenClaw's own line shape
// ({"type":"message","message":{…,"usage":{…}}}) or a bare message, with the
// field spellings of OpenClaw and of the provider APIs.
func parseUsage(data []byte) (usage, bool) {
	var line struct {
		Usage   map[string]any `json:"usage"`
		Message *struct {
			Usage map[string]any `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &line) != nil {
		return usage{}, false
	}
	m := line.Usage
	if m == nil && line.Message != nil {
		m = line.Message.Usage
	}
	if m == nil {
		return usage{}, false
	}
	u := usage{
		input:      firstCount(m, "input", "inputTokens", "input_tokens", "promptTokens", "prompt_tokens"),
		output:     firstCount(m, "output", "outputTokens", "output_tokens", "completionTokens", "completion_tokens"),
		cacheRead:  firstCount(m, "cacheRead", "cache_read", "cacheReadTokens", "cache_read_input_tokens"),
		cacheWrite: firstCount(m, "cacheWrite", "cache_write", "cacheWriteTokens", "cache_creation_input_tokens"),
		total:      firstCount(m, "totalTokens", "total", "total_tokens"),
	}
	switch c := m["cost"].(type) {
	case float64:
		u.cost, u.hasCost = c, true
	case map[string]any:
		if t, ok := c["total"].(float64); ok {
			u.cost, u.hasCost = t, true
		}
	}
	return u, u.input > 0 || u.output > 0 || u.total > 0
}

func firstCount(m map[string]any, names ...string) int64 {
	for _, n := range names {
		if v, ok := m[n].(float64); ok && v > 0 {
			return int64(v)
		}
	}
	return 0
}
