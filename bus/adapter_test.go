package bus_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// An adapter token carries its channel and speaks for no session; a token
// cannot be both, and its channel must be a channel id or *.
func TestAdapterTokens(t *testing.T) {
	op := bustest.Operator(t)
	v := bus.NewVerifier(op.PublicKey())
	for in, want := range map[string]string{"Telegram": "telegram", "*": "*", " slack ": "slack"} {
		tok, err := op.Mint(bus.Caller{Adapter: in}, time.Minute)
		if err != nil {
			t.Fatalf("mint %q: %v", in, err)
		}
		c, err := v.Verify(tok)
		if err != nil || c.Adapter != want || c.SessionKey != "" || c.AgentID != "" {
			t.Fatalf("verify %q: %+v %v", in, c, err)
		}
	}
	if _, err := op.Mint(bus.Caller{Adapter: "telegram", SessionKey: "agent:main:main"}, time.Minute); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("adapter and session: %v", err)
	}
	for _, bad := range []string{"tele.gram", "a b", "-x", strings.Repeat("a", 65), ">"} {
		if _, err := op.Mint(bus.Caller{Adapter: bad}, time.Minute); err == nil || !strings.Contains(err.Error(), "is not a channel id") {
			t.Fatalf("adapter %q: %v", bad, err)
		}
	}
	c := bus.Caller{Adapter: "telegram"}
	if !c.AllowsChannel("telegram") || c.AllowsChannel("slack") || !(bus.Caller{Adapter: "*"}).AllowsChannel("slack") || (bus.Caller{SessionKey: "k"}).AllowsChannel("") {
		t.Fatal("AllowsChannel")
	}
}

// The inbound endpoint takes adapter tokens only, the tools session tokens
// only.
func TestInboundEndpoint(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	names := bus.NewNames("")
	echo := bus.HandlerFunc(func(ctx context.Context, r *bus.Request) (any, error) {
		return map[string]any{"tool": r.Tool, "adapter": r.Caller.Adapter, "session": r.Caller.SessionKey}, nil
	})
	svc, err := bus.Serve(nc, map[string]bus.Handler{"echo": echo},
		bus.ServiceOptions{Names: names, Verifier: bus.NewVerifier(op.PublicKey()), Inbound: echo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	adapter, _ := op.Mint(bus.Caller{Adapter: "telegram"}, time.Minute)
	agent, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	out, err := bus.Inbound(ctx, nc, names, adapter, []byte(`{}`))
	if err != nil || string(out) != `{"adapter":"telegram","session":"","tool":"inbound"}` {
		t.Fatalf("inbound as adapter: %s %v", out, err)
	}
	if _, err := bus.Inbound(ctx, nc, names, agent, []byte(`{}`)); code(t, err) != 403 {
		t.Fatalf("inbound as agent: %v", err)
	}
	if _, err := bus.Call(ctx, nc, names, adapter, "echo", []byte(`{}`)); code(t, err) != 403 {
		t.Fatalf("tool as adapter: %v", err)
	}
	if _, err := bus.Call(ctx, nc, names, agent, "echo", []byte(`{}`)); err != nil {
		t.Fatalf("tool as agent: %v", err)
	}
	// sb.tools.inbound is no tool: the endpoint lives on sb.inbound only
	if _, err := bus.Call(ctx, nc, names, agent, "inbound", []byte(`{}`)); code(t, err) != 404 {
		t.Fatalf("sb.tools.inbound: %v", err)
	}

	// it is no tool: micro info lists the tools only
	msg, err := nc.Request("$SRV.INFO."+bus.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoints) != 1 || info.Endpoints[0].Subject != "sb.tools.echo" {
		t.Fatalf("micro info endpoints: %+v", info.Endpoints)
	}
}
