package handlers

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The hand-written reply encoding must be json.Marshal's, byte for byte.
func TestListReplyEncodingIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	pieces := []string{"", "a", "agent:main:main", "<b>&</b>", "\"q\"", `back\slash`, "tab\tnl\ncr\r", "\b\f\x00\x1f\x7f",
		"héllo", "日本語", "\u2028\u2029", "bad\xffutf8\xc3", "emoji 😀", "İstanbul ǅ"}
	str := func() string {
		var b []byte
		for range rng.IntN(4) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	num := func() int64 {
		switch rng.IntN(3) {
		case 0:
			return 0
		case 1:
			return rng.Int64N(1000)
		}
		return -rng.Int64()
	}
	for range 2000 {
		res := &listResult{HasMore: rng.IntN(2) == 0, LimitApplied: rng.IntN(300), TruncationReason: []string{"", "byte-limit"}[rng.IntN(2)], EnrichmentOmitted: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			n := rng.IntN(500)
			res.NextOffset = &n
		}
		if rng.IntN(2) == 0 {
			res.Visibility = &visibilityMeta{Mode: str(), Restricted: rng.IntN(2) == 0, Warning: str()}
		}
		if rng.IntN(10) > 0 {
			res.Sessions = []*listRow{}
		}
		for range rng.IntN(5) {
			r := &listRow{Key: str(), SessionID: str(), AgentID: str(), Kind: str(), Channel: str(), Archived: rng.IntN(2) == 0, Pinned: rng.IntN(2) == 0,
				Label: str(), Group: str(), DisplayName: str(), DerivedTitle: str(), LastMessagePreview: str(), ParentSessionKey: str(),
				UpdatedAt: num(), StateVersion: uint64(num()), Model: str(), ContextTokens: num(), TotalTokens: num(), Status: str(), AbortedLastRun: rng.IntN(2) == 0}
			for range rng.IntN(3) {
				r.ChildSessions = append(r.ChildSessions, str())
			}
			if rng.IntN(3) == 0 {
				r.Goal = &sessions.Goal{Objective: str(), Status: sessions.GoalActive, CreatedAt: num(), UpdatedAt: num(), ActorType: "human", ActorID: str(), Channel: str()}
			}
			if rng.IntN(4) == 0 {
				r.Messages = []json.RawMessage{json.RawMessage(`{"role":"user", "content":"<x>"}`)}
			}
			res.Sessions = append(res.Sessions, r)
		}
		res.Count = len(res.Sessions)
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeRows(res.Sessions).encode(res); !bytes.Equal(got, want) {
			t.Fatalf("hand-written encoding differs:\n got %s\nwant %s", got, want)
		}
	}
}

func BenchmarkListReplyEncoding(b *testing.B) {
	res := &listResult{LimitApplied: 100, HasMore: true}
	for i := range 100 {
		e := sessions.Sample(i, 1_790_000_000_000)
		res.Sessions = append(res.Sessions, &listRow{Key: e.Key, SessionID: e.SessionID, AgentID: "main", Kind: "other", Channel: "telegram",
			DisplayName: e.DisplayName, Label: e.Label, UpdatedAt: e.UpdatedAt, Model: e.Model, ContextTokens: e.ContextTokens, TotalTokens: e.TotalTokens})
	}
	res.Count = 100
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(res)
		}
	})
	b.Run("hand-written", func(b *testing.B) {
		for b.Loop() {
			_, _ = fitBudget(res, 0)
		}
	})
}
