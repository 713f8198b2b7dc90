package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// Four clients sending oversized requests (two just under 8 MiB, refused by
// the client library before sending; two just under the server's 4 MiB
// max_payload, refused by the worker) while eight call sessions_list: every
// good request is answered and every oversized one gets a 413 that says so.
func TestOversizedRequestsDoNotStarveGoodOnes(t *testing.T) {
	// 800 good calls in a burst on one token: load quotas, or the default
	// ones would refuse what this test means to see answered
	s := handlerstest.Start(t, func(c *config.Config) { c.Quotas = loadQuotaConfig() })
	names := bus.NewNames("")
	token := s.Token(bus.Caller{SessionKey: "agent:main:main", AgentID: "main"})
	body := func(size int) []byte { return []byte(`{"x":"` + strings.Repeat("a", size-8) + `"}`) }
	bigs := [][]byte{body(8<<20 - 4<<10), body(4<<20 - 4<<10)}
	const bigClients, bigEach, goodClients, goodEach = 4, 25, 8, 100
	var refused, wrongRefusal, good, failed atomic.Int64
	var badOnce sync.Once
	var firstBad error
	noteBad := func(err error) { badOnce.Do(func() { firstBad = err }) }
	var wg sync.WaitGroup
	client := func() *nats.Conn {
		nc, err := nats.Connect(s.Server.URL(), bustest.Options(t, s.Server.Deployment())...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	for i := range bigClients {
		nc := client()
		big := bigs[i%2]
		wg.Go(func() {
			for range bigEach {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := bus.Call(ctx, nc, names, token, "sessions_list", big)
				cancel()
				if e, ok := bus.AsError(err); ok && e.Code == bus.CodeTooLarge && (strings.Contains(e.Message, "the server accepts at most") || strings.Contains(e.Message, "the limit is 1048576 bytes")) {
					refused.Add(1)
				} else {
					wrongRefusal.Add(1)
					noteBad(err)
				}
			}
		})
	}
	for range goodClients {
		nc := client()
		wg.Go(func() {
			for range goodEach {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := bus.Call(ctx, nc, names, token, "sessions_list", []byte(`{}`))
				cancel()
				if err == nil {
					good.Add(1)
				} else {
					failed.Add(1)
					noteBad(err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("good answered %d, failed %d; oversized refused %d, otherwise %d", good.Load(), failed.Load(), refused.Load(), wrongRefusal.Load())
	if failed.Load() != 0 || wrongRefusal.Load() != 0 {
		t.Fatalf("%d good requests failed, %d oversized ones not refused with a 413 (first: %v)", failed.Load(), wrongRefusal.Load(), firstBad)
	}
}

// The largest send a tool accepts (a body just under 1 MiB) queues a run
// request that carries the message twice (as sent and as the annotated
// prompt) and again in the agent-to-agent flow's steps, with its replies:
// the server's max_payload must leave room for all of them, and the send
// and its flow must complete.
func TestLargestSendFitsMaxPayload(t *testing.T) {
	s, _ := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		c.Session.AgentToAgent.MaxPingPongTurns = 1
		c.Agents.List = []config.Agent{scriptAgent("main",
			map[string]any{"match": "^big", "reply": "got it"},
			map[string]any{"match": "^got it", "reply": "REPLY_SKIP"},
			map[string]any{"match": "^Agent-to-agent announce step", "reply": "ANNOUNCE_SKIP"},
		)}
	})
	// <, > and & as well: JSON encoders that escape them make a message
	// six times longer
	message := "big " + strings.Repeat("x<&>", (bus.MaxRequestBytes-16<<10)/4)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"sessionKey": "agent:main:big", "message": message, "timeoutSeconds": 30}); err != nil || buf.Len() > bus.MaxRequestBytes {
		t.Fatalf("request body %d bytes (%v) is over the tool limit", buf.Len(), err)
	}
	res := s.MustCall(mainKey, "sessions_send", buf.String())
	if res["status"] != "ok" || res["reply"] != "got it" {
		t.Fatalf("largest send: %.300v", res)
	}
}
