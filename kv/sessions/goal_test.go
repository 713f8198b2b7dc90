package sessions

import (
	"encoding/json"
	"testing"
)

// A goal reads back as written, a bare-string goal (an objective with no
// history) reads as an active one, and decoding over an entry never
// writes through the Goal it shares with a copy.
func TestGoalJSON(t *testing.T) {
	e := &Entry{Key: "agent:main:main"}
	e.SetRare(func(r *RareFields) {
		r.Goal = &Goal{Objective: "ship it", Status: GoalActive, CreatedAt: 1, UpdatedAt: 2, ActorType: "human", ActorID: "4242", Channel: "telegram"}
	})
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Entry
	if err := json.Unmarshal(b, &back); err != nil || *back.Rares().Goal != *e.Rares().Goal {
		t.Fatalf("round trip of %s: %+v %v", b, back.Rares().Goal, err)
	}

	var old Entry
	if err := json.Unmarshal([]byte(`{"key":"k","goal":"fix CI"}`), &old); err != nil {
		t.Fatal(err)
	}
	if g := old.Rares().Goal; !g.Active() || g.Objective != "fix CI" {
		t.Fatalf("string goal read as %+v", g)
	}

	shared := *e // shares Rare and its Goal
	if err := json.Unmarshal([]byte(`{"key":"agent:main:main","goal":{"status":"cleared","updatedAt":3}}`), &shared); err != nil {
		t.Fatal(err)
	}
	if g := e.Rares().Goal; g.Status != GoalActive || g.Objective != "ship it" {
		t.Fatalf("decoding a copy changed the original's goal to %+v", g)
	}
	if g := shared.Rares().Goal; g.Status != GoalCleared || g.UpdatedAt != 3 {
		t.Fatalf("copy's goal %+v", g)
	}
}
