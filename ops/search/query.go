package search

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/rules"
)

// Limits of one search. MaxResults is OpenClaw's (sessions.search and its
// Control UI cap a page at 25).
const (
	MaxResults     = 25
	MaxQueryChars  = 512
	MaxOffset      = 10000
	MaxSessionKeys = 1000
	MaxAgents      = 1000
	// MarkOpen and MarkClose surround each matched term in a snippet.
	MarkOpen  = "«"
	MarkClose = "»"
	// snippetTokens is how many tokens a snippet spans.
	snippetTokens = 16
)

// Orders of a result page.
const (
	OrderNewest = "newest"
	OrderRank   = "rank"
)

// Query is one search request (the body of <prefix>.ops.search).
type Query struct {
	// Text is matched as one phrase: its words, in order, case and
	// diacritics ignored (SQLite's unicode61 tokenizer).
	Text   string `json:"query"`
	Limit  int    `json:"limit,omitempty"`
	Offset int    `json:"offset,omitempty"`
	Order  string `json:"order,omitempty"` // newest (default) or rank
	// Filters; empty matches all.
	Agent       string   `json:"agent,omitempty"`
	Channel     string   `json:"channel,omitempty"`
	Kind        string   `json:"kind,omitempty"`
	SessionKeys []string `json:"sessionKeys,omitempty"`
	// Agents matches the entries of any of these agents: the agents a
	// caller may see, which the sessions_search tool passes when its
	// visibility spans more than one agent but not all of them.
	Agents []string `json:"agents,omitempty"`
	// Since and Until bound when the stream stored the entry: RFC 3339
	// text or unix milliseconds.
	Since json.RawMessage `json:"since,omitempty"`
	Until json.RawMessage `json:"until,omitempty"`

	// Archived searches the archived sessions too (as sessions_list's
	// archived: true lists them): their hits carry the archive's id.
	Archived bool `json:"archived,omitempty"`

	// Status asks for the index's freshness only: no query, no hits.
	Status bool `json:"status,omitempty"`

	since, until int64 // unix ms, 0: unbounded
}

// Hit is one matching transcript entry.
type Hit struct {
	SessionKey string `json:"sessionKey"`
	SessionID  string `json:"sessionId,omitempty"`
	Seq        uint64 `json:"seq"`   // stream sequence in SB_TRANSCRIPTS (0: an archive's)
	Entry      uint64 `json:"entry"` // 1-based position in the transcript (sessions_history's __openclaw.seq)
	Role       string `json:"role"`
	Timestamp  int64  `json:"timestamp"` // unix ms
	Snippet    string `json:"snippet"`
	// Archive is the archive holding an archived session's entry
	// (`sessionbus archive get` / `archive restore` take it).
	Archive string `json:"archive,omitempty"`
}

// Result is a page of hits and the index's freshness.
type Result struct {
	Results []Hit  `json:"results"`
	More    bool   `json:"more"`
	Offset  int    `json:"offset"`
	Order   string `json:"order"`
	Index   Status `json:"index"`
}

// Parse decodes and checks a request body; every error is the caller's
// and says what to send instead.
func Parse(body []byte) (*Query, error) {
	var q Query
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return nil, fmt.Errorf("malformed search request: %v (send a JSON object such as {\"query\":\"text\",\"limit\":25}; fields: query, limit, offset, order, agent, agents, channel, kind, sessionKeys, since, until, archived, status)", err)
	}
	return &q, q.check()
}

func (q *Query) check() error {
	q.Text = strings.TrimSpace(q.Text)
	if q.Status {
		return nil
	}
	switch n := utf8.RuneCountInString(q.Text); {
	case n == 0:
		return fmt.Errorf("empty query: give the words to find")
	case n > MaxQueryChars:
		return fmt.Errorf("query of %d characters: at most %d; search for a shorter phrase", n, MaxQueryChars)
	}
	if !strings.ContainsFunc(q.Text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) {
		return fmt.Errorf("query %q has no letter or digit: only words are indexed", q.Text)
	}
	switch {
	case q.Limit == 0:
		q.Limit = MaxResults
	case q.Limit < 0 || q.Limit > MaxResults:
		return fmt.Errorf("limit %d: give 1..%d", q.Limit, MaxResults)
	}
	if q.Offset < 0 || q.Offset > MaxOffset {
		return fmt.Errorf("offset %d: give 0..%d (narrow the search with filters to reach older hits)", q.Offset, MaxOffset)
	}
	switch q.Order {
	case "":
		q.Order = OrderNewest
	case OrderNewest, OrderRank:
	default:
		return fmt.Errorf("order %q: give %q or %q", q.Order, OrderNewest, OrderRank)
	}
	if q.Kind != "" && !rules.IsToolKind(q.Kind) {
		return fmt.Errorf("kind %q: give one of main, group, cron, hook, node, other", q.Kind)
	}
	if len(q.SessionKeys) > MaxSessionKeys {
		return fmt.Errorf("%d sessionKeys: at most %d", len(q.SessionKeys), MaxSessionKeys)
	}
	if len(q.Agents) > MaxAgents {
		return fmt.Errorf("%d agents: at most %d", len(q.Agents), MaxAgents)
	}
	var err error
	if q.since, err = parseTime("since", q.Since); err != nil {
		return err
	}
	if q.until, err = parseTime("until", q.Until); err != nil {
		return err
	}
	if q.since > 0 && q.until > 0 && q.until <= q.since {
		return fmt.Errorf("until is not after since: nothing could match")
	}
	return nil
}

// parseTime reads RFC 3339 text or unix milliseconds.
func parseTime(field string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("%s %q: give RFC 3339 time (2026-01-02T15:04:05Z) or unix milliseconds", field, s)
		}
		return t.UnixMilli(), nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("%s %s: give RFC 3339 time (2026-01-02T15:04:05Z) or positive unix milliseconds", field, raw)
	}
	return ms, nil
}

// phrase is the FTS5 query of text: one quoted phrase, so no word of the
// caller's is read as an operator (AND, NEAR, column filters).
func phrase(text string) string {
	return `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
}

// Search runs q (checked by Parse) against the index.
func (ix *Index) Search(ctx context.Context, q *Query) ([]Hit, bool, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT e.seq, e.key, e.n, e.role, e.ts, coalesce(a.session_id, s.session_id, ''), snippet(fts, 0, ?, ?, '…', ?), e.archive
FROM fts JOIN entries e ON e.seq = fts.rowid LEFT JOIN sess s ON s.key = e.key AND e.seq > 0 LEFT JOIN archives a ON a.id = e.archive AND e.seq < 0
WHERE fts MATCH ?`)
	args := []any{MarkOpen, MarkClose, snippetTokens, phrase(q.Text)}
	if !q.Archived {
		sb.WriteString(" AND fts.rowid > 0")
	}
	add := func(cond string, v any) {
		sb.WriteString(" AND " + cond)
		args = append(args, v)
	}
	if q.Agent != "" {
		add("e.agent = ?", rules.NormalizeAgentID(q.Agent))
	}
	if q.Channel != "" {
		add("s.channel = ?", strings.ToLower(q.Channel))
	}
	if q.Kind != "" {
		add("s.kind = ?", q.Kind)
	}
	if q.since > 0 {
		add("e.ts >= ?", q.since)
	}
	if q.until > 0 {
		add("e.ts < ?", q.until)
	}
	in := func(col string, vals []string, norm func(string) string) {
		if len(vals) == 0 {
			return
		}
		sb.WriteString(" AND " + col + " IN (" + strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",") + ")")
		for _, v := range vals {
			args = append(args, norm(v))
		}
	}
	in("e.key", q.SessionKeys, func(k string) string { return k })
	in("e.agent", q.Agents, rules.NormalizeAgentID)
	switch {
	case q.Order == OrderRank:
		sb.WriteString(" ORDER BY fts.rank, fts.rowid DESC")
	case q.Archived: // the stream's order does not cover the archives'
		sb.WriteString(" ORDER BY e.ts DESC, fts.rowid DESC")
	default:
		sb.WriteString(" ORDER BY fts.rowid DESC")
	}
	sb.WriteString(" LIMIT ? OFFSET ?")
	args = append(args, q.Limit+1, q.Offset)
	rows, err := ix.db.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, false, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	hits := []Hit{}
	for rows.Next() {
		var h Hit
		var n uint64
		var seq int64
		if err := rows.Scan(&seq, &h.SessionKey, &n, &h.Role, &h.Timestamp, &h.SessionID, &h.Snippet, &h.Archive); err != nil {
			return nil, false, err
		}
		h.Seq, h.Entry = uint64(max(seq, 0)), n+1
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search: %w", err)
	}
	more := len(hits) > q.Limit
	if more {
		hits = hits[:q.Limit]
	}
	return hits, more, nil
}
