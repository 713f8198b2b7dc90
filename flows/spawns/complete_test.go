package spawns

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

func child(key, requester, controller string, created int64) *subagents.Record {
	return &subagents.Record{
		RunID: "run-" + key, ChildSessionKey: key, ChildAgentID: "main",
		RequesterSessionKey: requester, ControllerSessionKey: controller,
		Task: "t", Cleanup: "keep", SpawnMode: "run", Runtime: "subagent", CreatedAt: created,
	}
}

// The child entry a spawn writes is taken by its worker's index as built
// (sessions.Store.CreateAsync, record.Echo), which is right only if it is
// exactly what decoding its stored form gives.
func TestChildEntryRoundTrips(t *testing.T) {
	base := child("agent:main:subagent:rt", "agent:main:main", "", 7)
	base.ChildSessionID, base.Label, base.Depth = "sid", "lbl", 2
	base.SubagentRole, base.SubagentControlScope = "orchestrator", "children"
	withModel := *base
	withModel.Model, withModel.Thinking = "gpt-x", "high"
	thread := *base
	thread.Thread = true
	thread.RequesterOrigin = &subagents.Origin{Channel: "slack", To: "C1", AccountID: "a", ThreadID: "t9"}
	for _, rec := range []*subagents.Record{base, &withModel, &thread} {
		e := ChildEntry(rec)
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back sessions.Entry
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, e) {
			t.Errorf("child entry %+v decodes as %+v", e, &back)
		}
	}
}
