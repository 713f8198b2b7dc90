package console_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// A message from the console's chat (webchat, OpenClaw's internal
// channel) leaves the session's delivery route where the person's last
// message on a real channel put it: announces keep reaching them there.
func TestWebchatKeepsTheRoute(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, _, err := f.stack.Worker.Deps.Store.Get(ctx, mainKey)
	if err != nil {
		t.Fatal(err)
	}
	if before.LastChannel != "terminal" || before.DeliveryContext == nil {
		t.Fatalf("the terminal turn set no route: %q %+v", before.LastChannel, before.DeliveryContext)
	}
	admin := f.client(f.credsText(auth.RoleAdmin))
	code, body := f.do(admin, "POST", "/api/chat", map[string]any{"key": mainKey, "text": "ping from the console"}, true)
	if code != 200 {
		t.Fatalf("chat: %d %s", code, body)
	}
	var res struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.RunID == "" {
		t.Fatalf("chat answer %s: %v", body, err)
	}
	rec, err := f.stack.Worker.Deps.Runs.Wait(ctx, res.RunID)
	if err != nil || rec.Status != runs.OK {
		t.Fatalf("the webchat turn: %+v %v", rec, err)
	}
	after, _, err := f.stack.Worker.Deps.Store.Get(ctx, mainKey)
	if err != nil {
		t.Fatal(err)
	}
	type route struct {
		Channel, To, Account, Thread string
		Ctx                          any
	}
	was := route{before.LastChannel, before.LastTo, before.LastAccountID, before.LastThreadID(), *before.DeliveryContext}
	is := route{after.LastChannel, after.LastTo, after.LastAccountID, after.LastThreadID(), *after.DeliveryContext}
	if !reflect.DeepEqual(was, is) {
		t.Fatalf("a webchat message moved the route: %+v, was %+v", is, was)
	}
}
