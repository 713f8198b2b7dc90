package sessions

import (
	"encoding/json"
	"testing"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// An entry this process creates with CreateAsync (a spawn's child entry)
// is taken by its index's watch as written, not decoded again.
func TestIndexTakesOwnCreateAsync(t *testing.T) {
	ctx, _, store, ix := indexed(t)
	depth := 1
	e := &Entry{Key: "agent:main:subagent:x", AgentID: "main", SessionID: "s1", CreatedAt: 5, UpdatedAt: 5, Label: "l", SpawnedBy: "agent:main:main", SpawnDepth: &depth}
	e.SetRare(func(r *RareFields) { r.SubagentRole, r.SubagentControlScope = "leaf", "none" })
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	f, err := store.CreateAsync(e)
	rev := bustest.Acked(t, f, err)
	if err := ix.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if v := store.echo.Take(data); v != nil {
		t.Fatal("the watch decoded the entry instead of taking it")
	}
	got := ix.Get("agent:main:subagent:x")
	if got != e || got.SessionID != "s1" || got.SpawnDepth == nil || *got.SpawnDepth != 1 || got.Rares().SubagentRole != "leaf" || got.Label != "l" {
		t.Fatalf("index holds %p %+v, want the entry written, %p", got, got, e)
	}
}

// The store's encoder writes exactly what json.Marshal of an Entry writes.
func TestEntryEncodeIsMarshal(t *testing.T) {
	depth := 2
	entries := []*Entry{
		{Key: "agent:main:main"},
		{Key: "agent:main:subagent:x", AgentID: "main", SessionID: "s1", CreatedAt: 5, UpdatedAt: 6, Label: "<b>&amp;</b>", SpawnedBy: "agent:main:main", SpawnDepth: &depth,
			DeliveryContext: &DeliveryContext{Channel: "slack", To: "C1", ThreadID: "t"}, Model: "m", InputTokens: 3},
	}
	rare := *entries[1]
	rare.SetRare(func(r *RareFields) {
		r.SubagentRole, r.ThinkingLevel = "leaf", "high"
		r.Goal = &Goal{Objective: "ünïcode \u2028 \"quoted\"", Status: GoalActive, UpdatedAt: 7, ActorType: "human", ActorID: "ops"}
		r.Imports = []ImportMark{{ID: "i", At: 1, N: 2, Done: true}}
	})
	entries = append(entries, &rare)
	for _, e := range entries {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.encode()
		if err != nil || string(got) != string(want) {
			t.Errorf("encode %s\nwant   %s (%v)", got, want, err)
		}
	}
}
