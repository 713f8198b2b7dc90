package auth

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus"
)

// The turns' live output: the deployment's own roles and ops may watch it;
// agents and adapters may not (it spans every session and channel).
func TestLiveOutputSubscribers(t *testing.T) {
	names := bus.NewNames("sb")
	live := names.Live(bus.EncodeKey("agent:main:main"))
	for _, tc := range []struct {
		role Role
		may  bool
	}{{RoleAdmin, true}, {RoleGateway, true}, {RoleWorker, true}, {RoleOps, true}, {RoleAgent, false}, {RoleAdapter, false}} {
		p := Permissions(tc.role, names, "_INBOX_x")
		may := false
		for _, s := range p.Sub.Allow {
			may = may || server.SubjectsCollide(s, live)
		}
		if may != tc.may {
			t.Errorf("%s may subscribe %s: %v, want %v", tc.role, live, may, tc.may)
		}
	}
	p := ChannelAdapterPermissions(names, "_INBOX_x", "telegram")
	for _, s := range p.Sub.Allow {
		if server.SubjectsCollide(s, live) {
			t.Errorf("a channel adapter may subscribe %s through %s", live, s)
		}
	}
}
