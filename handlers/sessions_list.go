package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// sessions_list limits, OpenClaw's (docs/tools.md).
const (
	listDefaultLimit   = 100
	listMaxLimit       = 200
	listMaxMessages    = 20
	listBudgetBytes    = 64 * 1024
	listEnrichParallel = 4
	listBudgetError    = "Session metadata exceeds the 64 KiB result budget even without previews; use a narrower inventory query"
)

// listRow is one sessions_list row (its fields: docs/tools.md,
// sessions_list).
type listRow struct {
	Key                string            `json:"key"`
	SessionID          string            `json:"sessionId,omitempty"`
	AgentID            string            `json:"agentId"`
	Kind               string            `json:"kind"`
	Channel            string            `json:"channel"`
	Archived           bool              `json:"archived"`
	Pinned             bool              `json:"pinned"`
	Label              string            `json:"label,omitempty"`
	Group              string            `json:"group,omitempty"`
	DisplayName        string            `json:"displayName,omitempty"`
	DerivedTitle       string            `json:"derivedTitle,omitempty"`
	LastMessagePreview string            `json:"lastMessagePreview,omitempty"`
	ParentSessionKey   string            `json:"parentSessionKey,omitempty"`
	UpdatedAt          int64             `json:"updatedAt,omitempty"`
	StateVersion       uint64            `json:"stateVersion,omitempty"`
	Model              string            `json:"model,omitempty"`
	ContextTokens      int64             `json:"contextTokens,omitempty"`
	TotalTokens        int64             `json:"totalTokens,omitempty"`
	Status             string            `json:"status,omitempty"`
	AbortedLastRun     bool              `json:"abortedLastRun,omitempty"`
	Goal               *sessions.Goal    `json:"goal,omitempty"` // an active goal only
	ChildSessions      []string          `json:"childSessions,omitempty"`
	Messages           []json.RawMessage `json:"messages,omitempty"`

	// plain: no string but DerivedTitle, LastMessagePreview and
	// ChildSessions has a byte JSON escapes (derivedFields.plain); plainKids: no
	// string of ChildSessions has one.
	plain, plainKids bool
}

type visibilityMeta struct {
	Mode       string `json:"mode"`
	Restricted bool   `json:"restricted"`
	Warning    string `json:"warning"`
}

type listResult struct {
	Count             int             `json:"count"`
	Sessions          []*listRow      `json:"sessions"`
	HasMore           bool            `json:"hasMore"`
	NextOffset        *int            `json:"nextOffset,omitempty"`
	LimitApplied      int             `json:"limitApplied"`
	TruncationReason  string          `json:"truncationReason,omitempty"`
	EnrichmentOmitted bool            `json:"enrichmentOmitted,omitempty"`
	Visibility        *visibilityMeta `json:"visibility,omitempty"`
}

func sessionsList(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	q, err := parseListQuery(p)
	if err != nil {
		return nil, err
	}
	limit := min(q.limit, listMaxLimit)
	// No per-call index barrier: the watch applies a write within one
	// server round trip, and a barrier would double the call's cost.
	guard := d.guard(r, rules.ActionList)
	nowMs := d.Now().UnixMilli()
	sc := listScratchPool.Get().(*listScratch)
	picked := sc.picked[:0]
	skipped, hasMore := 0, false
	take := func(e *sessions.Entry) bool {
		if skipped < q.offset {
			skipped++
			return true
		}
		if len(picked) == limit {
			hasMore = true
			return false
		}
		picked = append(picked, e)
		return true
	}
	consider := func(e *sessions.Entry) bool {
		if !d.listable(r, q, e, nowMs) {
			return true
		}
		if ok, _, _ := guard.CheckAgent(e.Key, r.derived(e).agentID()); !ok {
			return true
		}
		return take(e)
	}
	for _, e := range d.listCandidates(r) {
		if !consider(e) {
			break
		}
	}
	if r.visibility == rules.VisibilityAgent || r.visibility == rules.VisibilityAll {
		switch {
		case r.restrictToSpawned:
		case q.label != "": // a label matches few sessions: walk only those
			d.Index.EachLabeled(q.label, consider)
		case q.search != "": // so does a search, found by its trigrams
			d.Index.EachSearch(q.search, consider)
		default:
			d.Index.Each(consider)
		}
	}
	if q.archived != "false" && !hasMore {
		if err := d.eachArchived(ctx, r, q, guard, take); err != nil {
			sc.picked = picked
			sc.release()
			return nil, err
		}
	}
	sc.picked = picked
	rows := d.buildRows(ctx, r, q, picked, guard, sc)
	res := &listResult{Sessions: rows, HasMore: hasMore, LimitApplied: limit}
	if hasMore {
		next := q.offset + len(rows)
		res.NextOffset = &next
	}
	if r.visibility != rules.VisibilityAll {
		warning, ok := listWarnings[r.visibility]
		if !ok {
			warning = rules.VisibilityWarning(r.visibility)
		}
		res.Visibility = &visibilityMeta{Mode: string(r.visibility), Restricted: true, Warning: warning}
	}
	b, err := fitBudgetInto(sc.reply[:0], res, q.offset)
	if err != nil {
		sc.release()
		return nil, err
	}
	sc.reply = b
	return &bus.Lent{Data: b, Release: sc.release}, nil
}

// listWarnings is rules.VisibilityWarning of each visibility, formatted
// once instead of on every call.
var listWarnings = func() map[rules.Visibility]string {
	m := map[rules.Visibility]string{}
	for _, v := range []rules.Visibility{rules.VisibilitySelf, rules.VisibilityTree, rules.VisibilityAgent, rules.VisibilityAll} {
		m[v] = rules.VisibilityWarning(v)
	}
	return m
}()

// listScratch is one call's working memory, pooled: a page of 100 rows and
// its 30 KiB reply were about 75 KB of garbage per call, and on a worker
// holding a large index every garbage collection marks all of it, on the
// cores the calls run on.
type listScratch struct {
	picked []*sessions.Entry
	rows   []listRow
	ptrs   []*listRow
	kids   []*sessions.Entry // one row's children
	names  []string          // every row's childSessions
	reply  []byte
}

var listScratchPool = sync.Pool{New: func() any { return new(listScratch) }}

// listScratchMaxReply is the largest reply buffer kept for the next call:
// a page within the budget fits; a rare larger one is not kept.
const listScratchMaxReply = 2 * listBudgetBytes

// release drops what the call referenced (so a pooled scratch keeps no
// entry alive) and returns sc to the pool, once its reply is sent.
func (sc *listScratch) release() {
	clear(sc.picked)
	clear(sc.rows)
	clear(sc.ptrs)
	clear(sc.kids)
	clear(sc.names)
	sc.picked, sc.rows, sc.ptrs, sc.kids, sc.names = sc.picked[:0], sc.rows[:0], sc.ptrs[:0], sc.kids[:0], sc.names[:0]
	if cap(sc.reply) > listScratchMaxReply {
		sc.reply = nil
	}
	sc.reply = sc.reply[:0]
	listScratchPool.Put(sc)
}

// listCandidates is the small set tree/self visibility (or a spawned-only
// sandbox) can see, pinned first, then newest; wider visibility walks the whole index.
func (d *Deps) listCandidates(r *requester) []*sessions.Entry {
	if (r.visibility == rules.VisibilityAgent || r.visibility == rules.VisibilityAll) && !r.restrictToSpawned {
		return nil
	}
	out := d.Index.Children(r.key)
	if !r.restrictToSpawned {
		if self := d.Index.Get(r.key); self != nil {
			out = append(out, self)
		}
	}
	// the index's order: pinned first, then newest, then key
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pinned != out[j].Pinned {
			return out[i].Pinned
		}
		if out[i].UpdatedAt != out[j].UpdatedAt {
			return out[i].UpdatedAt > out[j].UpdatedAt
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func (d *Deps) buildRows(ctx context.Context, r *requester, q *listQuery, es []*sessions.Entry, guard rules.Guard, sc *listScratch) []*listRow {
	sc.rows = slices.Grow(sc.rows[:0], len(es))[:len(es)]
	// never nil: a page with no rows is "sessions":[], not null
	sc.ptrs = slices.Grow(sc.ptrs[:0], max(len(es), 1))[:len(es)]
	rows := sc.ptrs
	for i, e := range es {
		rows[i] = &sc.rows[i]
		d.baseRow(rows[i], r, e, guard, sc)
	}
	if q.messageLimit == 0 && !q.derivedTitles && !q.lastMessage {
		return rows
	}
	sem := make(chan struct{}, listEnrichParallel)
	var wg sync.WaitGroup
	for i, e := range es {
		if q.fromArchive[e] {
			continue // its transcript is in its archive, not under its key
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.enrichRow(ctx, q, e, rows[i])
		}()
	}
	wg.Wait()
	return rows
}

// baseRow fills row (its previous contents overwritten) for e, its
// children's keys kept in sc.
func (d *Deps) baseRow(row *listRow, r *requester, e *sessions.Entry, guard rules.Guard, sc *listScratch) {
	f := r.derived(e)
	*row = listRow{
		Key:            r.alias.Display(e.Key),
		SessionID:      e.SessionID,
		AgentID:        f.agentID(),
		Kind:           f.kind(),
		Channel:        f.channel(),
		Archived:       e.Archived,
		Pinned:         e.Pinned,
		Label:          e.Label,
		Group:          e.Group,
		DisplayName:    e.DisplayName,
		UpdatedAt:      e.UpdatedAt,
		StateVersion:   max(e.Rares().StateVersion, d.Heads.StateVersion(e.Key)),
		Model:          e.Model,
		ContextTokens:  e.ContextTokens,
		TotalTokens:    e.TotalTokens,
		Status:         e.Status,
		AbortedLastRun: e.AbortedLastRun,
		plain:          f.Plain, // the key and parent as displayed too: as stored, or "main"
	}
	if g := e.Rares().Goal; g.Active() {
		row.Goal = g
	}
	if p := e.Parent(); p != "" {
		var ok bool
		if f.ParentSameAgent {
			ok, _, _ = guard.CheckAgent(p, f.agentID()) // guard.Check(p), the key parsed once
		} else {
			ok, _, _ = guard.Check(p)
		}
		if ok {
			row.ParentSessionKey = r.alias.Display(p)
		}
	}
	sc.kids = d.Index.AppendChildren(sc.kids[:0], e.Key)
	from := len(sc.names)
	row.plainKids = true
	for _, c := range sc.kids {
		cf := r.derived(c)
		if ok, _, _ := guard.CheckAgent(c.Key, cf.agentID()); !ok {
			continue
		}
		sc.names = append(sc.names, r.alias.Display(c.Key))
		row.plainKids = row.plainKids && cf.Plain // its key, or "main"
	}
	if to := len(sc.names); to > from {
		// a later append may move sc.names; this row keeps its own part
		row.ChildSessions = sc.names[from:to:to]
		if !slices.IsSorted(row.ChildSessions) { // the index keeps them by key: only "main" can move
			sort.Strings(row.ChildSessions)
		}
	}
}

func (d *Deps) enrichRow(ctx context.Context, q *listQuery, e *sessions.Entry, row *listRow) {
	if q.derivedTitles {
		row.DerivedTitle = d.derivedTitle(ctx, e)
	}
	if q.lastMessage {
		row.LastMessagePreview = d.lastMessagePreview(ctx, e)
	}
	if q.messageLimit > 0 {
		entries, _, err := d.Transcripts.Tail(ctx, bus.EncodeKey(e.Key), q.messageLimit, 0)
		if err != nil {
			d.Log.Warn("sessions_list: transcript read failed", "session", e.Key, "err", err)
			return
		}
		for _, m := range d.sanitizeEntries(entries, false, false) {
			row.Messages = append(row.Messages, m.raw)
		}
	}
}

// fitBudget keeps the serialized result within 64 KiB: first dropping the
// enrichment if even the first row does not fit, then keeping the largest
// prefix of rows that fits. It returns the encoded reply. Each row is
// encoded once (again only if its enrichment is dropped); the candidate
// replies reuse those bytes.
func fitBudget(res *listResult, offset int) (json.RawMessage, error) {
	return fitBudgetInto(nil, res, offset)
}

// fitBudgetInto is fitBudget writing the reply that fits as it is (the
// usual case) into buf, grown if needed.
func fitBudgetInto(buf []byte, res *listResult, offset int) (json.RawMessage, error) {
	res.Count = len(res.Sessions)
	if b := appendResult(slices.Grow(buf[:0], replySizeHint(res)), res, nil); len(b) <= listBudgetBytes {
		return b, nil
	}
	x := encodeRows(res.Sessions)
	all := res.Sessions
	res.Sessions = all[:1]
	if len(x.encode(res)) > listBudgetBytes {
		for _, row := range all {
			row.Messages, row.DerivedTitle, row.LastMessagePreview = nil, "", ""
		}
		x = encodeRows(all)
		res.EnrichmentOmitted = true
		if len(x.encode(res)) > listBudgetBytes {
			return nil, badRequest(listBudgetError)
		}
	}
	res.Sessions = all
	if b := x.encode(res); len(b) <= listBudgetBytes {
		return b, nil
	}
	keep := sort.Search(len(all)+1, func(n int) bool {
		if n == 0 {
			return false
		}
		res.Sessions = all[:n]
		return len(x.encode(res)) > listBudgetBytes
	}) - 1
	res.Sessions = all[:keep]
	res.TruncationReason = "byte-limit"
	res.HasMore = true
	next := offset + keep
	res.NextOffset = &next
	return x.encode(res), nil
}

// replySizeHint is about the encoded size of res, so the reply is written
// into one buffer without regrowing it.
func replySizeHint(res *listResult) int {
	n := 256
	if res.Visibility != nil {
		n += len(res.Visibility.Warning)
	}
	for _, r := range res.Sessions {
		n += 280 + len(r.Key) + len(r.SessionID) + len(r.AgentID) + len(r.Label) + len(r.DisplayName) +
			len(r.DerivedTitle) + len(r.LastMessagePreview) + len(r.ParentSessionKey) + len(r.Model)
		for _, c := range r.ChildSessions {
			n += len(c) + 3
		}
	}
	return n
}

// encodedRows holds each row's JSON, in the order of the rows given.
type encodedRows struct {
	rows  [][]byte
	total int
}

func encodeRows(rows []*listRow) *encodedRows {
	buf := make([]byte, 0, 400*len(rows)) // a typical row is 300 bytes
	ends := make([]int, len(rows))
	for i, r := range rows {
		buf = appendRow(buf, r)
		ends[i] = len(buf)
	}
	x := &encodedRows{rows: make([][]byte, len(rows)), total: len(buf)}
	from := 0
	for i, end := range ends {
		x.rows[i] = buf[from:end:end]
		from = end
	}
	return x
}

// encode is json.Marshal(res) with res.Sessions a prefix of the rows
// encoded.
func (x *encodedRows) encode(res *listResult) json.RawMessage {
	res.Count = len(res.Sessions)
	size := 256 + x.total + len(res.Sessions)
	if res.Visibility != nil {
		size += len(res.Visibility.Warning) + 16
	}
	return appendResult(make([]byte, 0, size), res, x.rows)
}
