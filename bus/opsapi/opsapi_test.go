package opsapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
)

// What the checks let through and what they refuse, without a server (the
// integration tests try each route against one).
func TestCheck(t *testing.T) {
	o := &API{names: bus.NewNames("")}
	for _, c := range []struct {
		api, body, refusal string
	}{
		{"STREAM.INFO.SB_RUNS", ``, ""},
		{"DIRECT.GET.KV_runs.$KV.runs.r1", ``, ""},
		{"CONSUMER.MSG.NEXT.SB_TRANSCRIPTS.mine", `{"batch":1}`, ""},
		{"CONSUMER.CREATE.SB_DELIVER", `{"config":{"deliver_subject":"_INBOX.abc.1"}}`, ""},
		{"CONSUMER.CREATE.SB_DELIVER.mine.sb.deliver.web", `{"config":{}}`, ""},
		{"STREAM.PURGE.SB_TRANSCRIPTS", `{}`, "may only read"},
		{"STREAM.INFO", ``, "may only read"},
		{"STREAM.INFO.A.B", ``, "may only read"},
		{"CONSUMER.DELETE.SB_RUNS.gateways", ``, "may only read"},
		{"CONSUMER.DURABLE.CREATE.SB_RUNS.x", `{}`, "may only read"},
		{"CONSUMER.MSG.NEXT.SB_RUNS.gateways", `{}`, "gateways'"},
		{"CONSUMER.CREATE.SB_RUNS.gateways", `{}`, "gateways'"},
		{"CONSUMER.CREATE.SB_RUNS.gateways.sb.runs.x", `{}`, "gateways'"},
		{"CONSUMER.CREATE.SB_DELIVER", `{"config":{"deliver_subject":"sb.tr.x"}}`, "only to an inbox"},
		{"CONSUMER.CREATE.SB_DELIVER", `{"config":{"deliver_subject":"_INBOX.>"}}`, "only to an inbox"},
		{"CONSUMER.CREATE.SB_DELIVER", `{"config":{"deliver_subject":"_INBOX.a","Deliver_Subject":"sb.tr.x"}}`, "spell it"},
		{"CONSUMER.CREATE.SB_DELIVER", `{"Config":{"deliver_subject":"sb.tr.x"}}`, "spell it"},
		{"CONSUMER.CREATE.SB_DELIVER", `{"config":{},"action":"update"}`, "not update"},
		{"CONSUMER.CREATE.SB_DELIVER", `[]`, "not a JSON object"},
	} {
		out, err := o.check(c.api, []byte(c.body))
		if c.refusal == "" {
			if err != nil {
				t.Errorf("%s %s: %v", c.api, c.body, err)
			}
			if strings.HasPrefix(c.api, "CONSUMER.CREATE.") {
				var req struct{ Action string }
				if json.Unmarshal(out, &req) != nil || req.Action != "create" {
					t.Errorf("%s %s passed on as %s: want the action pinned to create", c.api, c.body, out)
				}
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.refusal) {
			t.Errorf("%s %s: %v, want a refusal saying %q", c.api, c.body, err, c.refusal)
		}
	}
}

// A repeated key is passed on once, as checked: the server cannot read
// another deliver subject than the one allowed.
func TestCheckReencodes(t *testing.T) {
	out, err := checkConsumer([]byte(`{"config":{"deliver_subject":"sb.tr.x","deliver_subject":"_INBOX.a"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sb.tr.x") {
		t.Fatalf("passed on %s", out)
	}
}
