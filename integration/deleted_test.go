package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
)

// An operator deletes each stream and bucket under a running worker and
// gateway. Each comes back, the next send completes, and nothing that was
// deleted is served again (before, the index listed deleted sessions and a
// deleted SB_RUNS left the gateway consuming nothing until a restart).
func TestStreamsDeletedUnderARunningServer(t *testing.T) {
	s, _ := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		c.Session.AgentToAgent.MaxPingPongTurns = 0 // no background turns holding the lanes
		c.Agents.List = []config.Agent{scriptAgent("main", map[string]any{"reply": "pong"})}
	})
	const peer = "agent:main:peer"
	s.Import(importer.ImportOptions{SessionKey: peer}, `{"role":"user","content":"before"}`)
	send := func() bool {
		res, err := s.Call(mainKey, "sessions_send", `{"sessionKey":"`+peer+`","message":"ping","timeoutSeconds":5}`)
		return err == nil && res["status"] == "ok" && res["reply"] == "pong"
	}
	if !send() {
		t.Fatal("send before any deletion failed")
	}
	names := bus.NewNames("")
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{names.RunsStream(), bus.KVStream(names.RunsBucket()), bus.KVStream(names.SubagentsBucket()), names.TranscriptsStream()} {
		if err := js.DeleteStream(context.Background(), stream); err != nil {
			t.Fatalf("delete %s: %v", stream, err)
		}
		bustest.WaitFor(t, 30*time.Second, "a send to complete after "+stream+" was deleted", send)
	}
	// the transcript stream went: its old entries are gone, not served from a stale index
	hist := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"`+peer+`","limit":50}`)
	for _, m := range hist["messages"].([]any) {
		if m.(map[string]any)["content"] == "before" {
			t.Fatalf("history still serves an entry of the deleted stream: %v", hist)
		}
	}
	if err := js.DeleteKeyValue(context.Background(), names.SessionsBucket()); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 30*time.Second, "sessions_list to drop the deleted sessions", func() bool {
		res, err := s.Call(mainKey, "sessions_list", `{}`)
		return err == nil && res["count"] == float64(0)
	})
	// and the bucket is back before the servers stop
	bustest.WaitFor(t, 30*time.Second, "the sessions bucket to be recreated", func() bool {
		_, err := js.KeyValue(context.Background(), names.SessionsBucket())
		return err == nil
	})
}
