package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

const cronJobJSON = `{"name":"nightly","schedule":{"kind":"cron","expr":"0 3 * * *","tz":"UTC"},` +
	`"payload":{"kind":"agentTurn","message":"report"},"delivery":{"mode":"none"}}`

// TestCronOpsRefuseChannelTokens: a channel adapter's token, or a
// session's, may not schedule, list, run or remove cron jobs (only an ops
// token for every channel may); nothing is written by the refused calls.
func TestCronOpsRefuseChannelTokens(t *testing.T) {
	s := handlerstest.Start(t, nil)
	names := bus.NewNames("")
	ops := s.Token(bus.Caller{Adapter: bus.AnyChannel})
	ctx := bustest.Context(t)
	reply, err := bus.CronOp(ctx, s.Conn, names, "add", ops, []byte(cronJobJSON))
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID string }
	if err := json.Unmarshal(reply, &job); err != nil || job.ID == "" {
		t.Fatalf("add: %s %v", reply, err)
	}
	for _, tok := range []string{
		s.Token(bus.Caller{Adapter: "telegram"}),
		s.Token(bus.Caller{SessionKey: "agent:main:main"}),
		"",
	} {
		for op, body := range map[string]string{
			"add": cronJobJSON, "list": `{}`, "rm": `{"jobId":"` + job.ID + `"}`,
			"run": `{"jobId":"` + job.ID + `"}`, "disable": `{"jobId":"` + job.ID + `"}`,
		} {
			_, err := bus.CronOp(ctx, s.Conn, names, op, tok, []byte(body))
			e, ok := bus.AsError(err)
			if !ok || (e.Code != bus.CodeForbidden && e.Code != bus.CodeUnauthorized) {
				t.Errorf("cron %s with a non-ops token: %v, want refused", op, err)
			}
		}
	}
	reply, err = bus.CronOp(ctx, s.Conn, names, "list", ops, nil)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Jobs []struct {
			ID      string
			Enabled bool
			State   struct{ LastRunID string }
		}
	}
	if err := json.Unmarshal(reply, &list); err != nil || len(list.Jobs) != 1 || !list.Jobs[0].Enabled || list.Jobs[0].State.LastRunID != "" {
		t.Fatalf("after the refused calls: %s", reply)
	}
}

// TestCronJobSessionListed: a run of an isolated job lists the job's own
// session with kind cron; the run's session stays out of the list.
func TestCronJobSessionListed(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	names := bus.NewNames("")
	ops := s.Token(bus.Caller{Adapter: bus.AnyChannel})
	ctx := bustest.Context(t)
	reply, err := bus.CronOp(ctx, s.Conn, names, "add", ops, []byte(cronJobJSON))
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID string }
	_ = json.Unmarshal(reply, &job)
	if _, err := bus.CronOp(ctx, s.Conn, names, "run", ops, []byte(`{"jobId":"`+job.ID+`"}`)); err != nil {
		t.Fatal(err)
	}
	want := "agent:main:cron:" + job.ID
	var rows []any
	bustest.WaitFor(t, 10*time.Second, "the job's session listed", func() bool {
		res := s.MustCall("agent:main:main", "sessions_list", `{"kinds":["cron"]}`)
		rows, _ = res["sessions"].([]any)
		return len(rows) == 1
	})
	row, _ := rows[0].(map[string]any)
	if row["key"] != want || row["kind"] != "cron" {
		t.Fatalf("cron row %v, want key %s kind cron", row, want)
	}
	all := s.MustCall("agent:main:main", "sessions_list", `{}`)
	b, _ := json.Marshal(all)
	if strings.Contains(string(b), ":run:") {
		t.Fatalf("a cron run session is listed: %s", b)
	}
}

// TestCronAnnounceDelivers: an isolated job announcing to a channel that
// has an adapter delivers its run's reply there, to the job's target.
func TestCronAnnounceDelivers(t *testing.T) {
	s := handlerstest.Start(t, nil)
	gatewaytest.Start(t, s, s.Conn, "gw-cron", nil, gateway.Options{})
	ctx := bustest.Context(t)
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	names := bus.NewNames("")
	// the durable consumer a slack adapter creates when it starts
	if _, err := js.CreateOrUpdateConsumer(ctx, names.DeliverStream(), jetstream.ConsumerConfig{
		Durable: "slack", FilterSubject: names.Deliver("slack"), AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	sub := deliverySub(t, s.Conn)
	ops := s.Token(bus.Caller{Adapter: bus.AnyChannel})
	reply, err := bus.CronOp(ctx, s.Conn, names, "add", ops, []byte(`{"name":"brief","schedule":{"kind":"cron","expr":"0 7 * * *","tz":"America/Los_Angeles"},`+
		`"payload":{"kind":"agentTurn","message":"Summarize overnight updates."},"delivery":{"mode":"announce","channel":"slack","to":"channel:C1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID string }
	_ = json.Unmarshal(reply, &job)
	if _, err := bus.CronOp(ctx, s.Conn, names, "run", ops, []byte(`{"jobId":"`+job.ID+`"}`)); err != nil {
		t.Fatal(err)
	}
	subj, d := nextDelivery(t, sub)
	b, _ := json.Marshal(d)
	if subj != "sb.deliver.slack" || d["to"] != "channel:C1" || !strings.Contains(string(b), "Summarize overnight updates.") {
		t.Fatalf("delivery on %s: %s", subj, b)
	}
}
