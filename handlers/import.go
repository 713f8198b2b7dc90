package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers/rules"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// ImportOptions describe the session a transcript is loaded into.
type ImportOptions struct {
	SessionKey string
	AgentID    string
	Label      string
	SpawnedBy  string
}

// ImportResult reports what an import wrote.
type ImportResult struct {
	SessionKey string `json:"sessionKey"`
	SessionID  string `json:"sessionId"`
	Created    bool   `json:"created"`
	Imported   int    `json:"imported"`
	Skipped    int    `json:"skipped"`
	FirstEntry uint64 `json:"firstEntry"`
	Total      uint64 `json:"totalEntries"`
}

const (
	labelMaxLength   = 512
	importMaxLine    = 16 << 20
	importLineFormat = `each line must be {"role":..,"content":..} or {"type":"message","message":{...}}`
)

// Import reads a JSONL transcript and appends it to a session, creating the
// entry if absent. Every line is checked before anything is written, so a
// bad file writes nothing.
func Import(ctx context.Context, store *sessions.Store, tr *transcripts.Store, o ImportOptions, in io.Reader, now time.Time) (*ImportResult, error) {
	key := strings.TrimSpace(o.SessionKey)
	if err := rules.ValidateSessionKeyInput(key); err != nil {
		return nil, thrown(err)
	}
	if o.SpawnedBy != "" {
		if err := rules.ValidateSessionKeyInput(o.SpawnedBy); err != nil {
			return nil, badRequest("--spawned-by: " + err.Error())
		}
	}
	agentID := strings.ToLower(strings.TrimSpace(o.AgentID))
	if agentID == "" {
		agentID = rules.AgentIDFromKey(key)
	} else if !rules.ValidAgentID(agentID) {
		return nil, badRequest(fmt.Sprintf("--agent %q is invalid: agent ids must match [a-z0-9][a-z0-9_-]{0,63}", o.AgentID))
	}
	if len([]rune(o.Label)) > labelMaxLength {
		return nil, badRequest(fmt.Sprintf("--label is %d characters; the limit is %d", len([]rune(o.Label)), labelMaxLength))
	}
	msgs, skipped, err := readTranscript(in)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	res := &ImportResult{SessionKey: key, Skipped: skipped}
	e := &sessions.Entry{
		Key: key, AgentID: agentID, SessionID: sessions.NewID(), Label: o.Label,
		SpawnedBy: o.SpawnedBy, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
	}
	if o.SpawnedBy != "" {
		depth := 1
		if parent, _, err := store.Get(ctx, o.SpawnedBy); err == nil && parent.SpawnDepth != nil {
			depth = *parent.SpawnDepth + 1
		}
		e.SpawnDepth = &depth
	}
	switch _, err := store.Create(ctx, e); {
	case err == nil:
		res.Created = true
	case errors.Is(err, sessions.ErrExists):
	default:
		return nil, fmt.Errorf("create session %s: %w", key, err)
	}
	if len(msgs) > 0 {
		first, err := tr.Append(ctx, bus.EncodeKey(key), msgs...)
		if err != nil {
			return nil, fmt.Errorf("append transcript of %s: %w", key, err)
		}
		res.FirstEntry = first
		res.Imported = len(msgs)
	}
	cur, _, err := store.Update(ctx, key, func(cur *sessions.Entry) error {
		cur.UpdatedAt = max(cur.UpdatedAt, now.UnixMilli())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update session %s: %w", key, err)
	}
	res.SessionID = cur.SessionID
	if res.Total, err = tr.Count(ctx, bus.EncodeKey(key)); err != nil {
		return nil, err
	}
	return res, nil
}

// readTranscript parses and checks every line, returning compact messages.
func readTranscript(in io.Reader) ([][]byte, int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), importMaxLine)
	var out [][]byte
	skipped := 0
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, 0, fmt.Errorf("line %d is not a JSON object (%v): %s", n, err, importLineFormat)
		}
		if t, ok := obj["type"]; ok {
			var typ string
			_ = json.Unmarshal(t, &typ)
			if typ != "message" {
				skipped++ // session headers, model changes: not messages
				continue
			}
			inner, ok := obj["message"]
			if !ok {
				return nil, 0, fmt.Errorf(`line %d has "type":"message" but no "message" object: %s`, n, importLineFormat)
			}
			if err := json.Unmarshal(inner, &obj); err != nil {
				return nil, 0, fmt.Errorf("line %d: message is not a JSON object: %s", n, importLineFormat)
			}
			line = inner
		}
		var r string
		if err := json.Unmarshal(obj["role"], &r); err != nil || strings.TrimSpace(r) == "" {
			return nil, 0, fmt.Errorf(`line %d has no "role" string: %s`, n, importLineFormat)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return nil, 0, fmt.Errorf("line %d: %v", n, err)
		}
		out = append(out, buf.Bytes())
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("read transcript: %w", err)
	}
	return out, skipped, nil
}
