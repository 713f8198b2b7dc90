package sessions

import (
	"encoding/json"
	"reflect"
	"testing"
)

// everyFieldEntry sets every stored field, nested ones included.
func everyFieldEntry() *Entry {
	depth := 2
	e := &Entry{
		Key: "agent:main:telegram:direct:u1", AgentID: "main", SessionID: "s1", CreatedAt: -5, UpdatedAt: 1 << 62,
		Label: "l", DisplayName: "Zoë", Subject: "s", Group: "g", Channel: "telegram",
		LastChannel: "slack", LastTo: "u2", LastAccountID: "a",
		Origin:          &Origin{Provider: "telegram", AccountID: "a", ThreadID: "t", ChatType: "group", From: "f", To: "to"},
		DeliveryContext: &DeliveryContext{Channel: "slack", To: "u1", AccountID: "a", ThreadID: "t"},
		ChatType:        "direct", SpawnedBy: "p", ParentSessionKey: "q", SpawnDepth: &depth,
		Model: "m", ModelProvider: "mp", InputTokens: 1, OutputTokens: 2, TotalTokens: 3, ContextTokens: 4,
		Status: "running", StartedAt: 5, EndedAt: 6, AbortedLastRun: true, Archived: true, Pinned: true,
	}
	e.SetRare(func(r *RareFields) {
		*r = RareFields{DerivedTitle: "t", LastThreadID: "th", SendPolicy: "deny",
			OwnerID: "o", CreatorID: "c", ProjectID: "pr", WorkspaceDir: "/w", SubagentRole: "leaf", SubagentControlScope: "none", SpawnedWorkspaceDir: "/s",
			ProviderOverride: "po", ModelOverride: "mo", ThinkingLevel: "high",
			Goal:      &Goal{Objective: "ship", Status: GoalActive, CreatedAt: 1, UpdatedAt: 2, ActorType: "human", ActorID: "x", Channel: "ops"},
			CacheRead: 7, CacheWrite: 8, CompactionCount: 9, RuntimeMs: 10, StateVersion: 1<<64 - 1,
			SessionStartedAt: 11, LastInteractionAt: 12, Imports: []ImportMark{{ID: "f", At: 3, N: 2, Done: true}}}
	})
	return e
}

// decodeBoth decodes data by UnmarshalJSON (the plain path where it
// applies) and by the full decoder alone, and fails the test when they
// differ in the entry or in whether they fail.
func decodeBoth(t *testing.T, data []byte) (plain bool) {
	t.Helper()
	var full, got, fast Entry
	errFull := full.decodeFull(data)
	errGot := got.UnmarshalJSON(data)
	if (errFull == nil) != (errGot == nil) {
		t.Fatalf("%q: UnmarshalJSON gave error %v, the full decoder %v", data, errGot, errFull)
	}
	if errFull == nil && !reflect.DeepEqual(got, full) {
		t.Fatalf("%q: UnmarshalJSON gave\n%#v\nthe full decoder\n%#v", data, got, full)
	}
	plain = fast.decodePlain(data, nil)
	if plain && (errFull != nil || !reflect.DeepEqual(fast, full)) {
		t.Fatalf("%q: the plain decoder gave\n%#v\nthe full decoder (error %v)\n%#v", data, fast, errFull, full)
	}
	return plain
}

// The stored entries the store writes (every bench sample, an entry with
// every field set) take the plain path, to the full decoder's result.
func TestEntryDecodePlain(t *testing.T) {
	es := append(benchEntries(), everyFieldEntry(), &Entry{Key: "k"})
	for _, e := range es {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !decodeBoth(t, data) {
			t.Fatalf("%s: not decoded by the plain path", data)
		}
	}
	// forms the plain path leaves to the full decoder, and some neither accepts
	for _, s := range []string{
		`{"KEY":"a"}`, `{"key":"a","key":"b"}`, `{"key":null}`, `{"key":"a\u00e9"}`, `{"key":"\xff"}`,
		`{"createdAt":1.0}`, `{"createdAt":1e3}`, `{"createdAt":01}`, `{"createdAt":-0}`, `{"stateVersion":-1}`,
		`{"createdAt":9223372036854775808}`, `{"createdAt":-9223372036854775808}`, `{"unknown":1}`,
		`{"goal":"bare"}`, `{"goal":null}`, `{"sessionbusImports":[]}`, `{"origin":{}}`, `{"origin":{"To":"x"}}`,
		`{"spawnDepth":null}`, `{"key":"a"} x`, `{"key":"a",}`, `{"key" : "a" , "pinned" : true }`, ` {} `,
		`{"pinned":tru}`, `{"pinned":"true"}`, `{"key":1}`, `[]`, ``, `{"origin":{"provider":"a","provider":"b"}}`,
		`{"origin":{"provider":"a"},"origin":{"to":"b"}}`, `{"goal":{"objective":"a"},"goal":{"status":"b"}}`,
	} {
		decodeBoth(t, []byte(s))
	}
}

// FuzzEntryDecode checks that UnmarshalJSON, and the plain decoder where
// it accepts the input, give what the full decoder gives.
//
//	go test -run '^$' -fuzz FuzzEntryDecode -fuzztime 3m ./kv/sessions/
func FuzzEntryDecode(f *testing.F) {
	for _, e := range append(benchEntries()[:20], everyFieldEntry()) {
		data, err := json.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"key":"a","KEY":"b","goal":"x","spawnDepth":-1,"origin":{"to":"\u00e9"}}`))
	f.Add([]byte(`{"origin":{"provider":"a"},"origin":{"to":"b"},"pinned":false}`))
	f.Fuzz(func(t *testing.T, data []byte) { decodeBoth(t, data) })
}
