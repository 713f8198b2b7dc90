package bus_test

import (
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A guard that never gets the deletion advisory (here its user may not
// subscribe to it; in production it was reconnecting) still recreates the
// deleted stream, from its periodic listing of the account's streams.
func TestGuardCheckRecreatesWithoutAdvisory(t *testing.T) {
	s := bustest.Server(t)
	u, err := s.Deployment().MintWith(auth.DefaultAccount, auth.RoleWorker, "guard-test", "", 0, func(p *jwt.Permissions) {
		p.Sub.Deny.Add("$JS.EVENT.>")
	})
	if err != nil {
		t.Fatal(err)
	}
	_, js := bustest.ConnectURL(t, s.URL(), u.Options()...)
	ctx := bustest.Context(t)
	_, sc, err := bus.OpenStream(ctx, js, jetstream.StreamConfig{Name: "GUARDED", Subjects: []string{"sb.guarded.>"}})
	if err != nil {
		t.Fatal(err)
	}
	// a stream the guard does not watch: the listing passes over it
	if _, _, err := bus.OpenStream(ctx, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"sb.other.>"}}); err != nil {
		t.Fatal(err)
	}
	g := bus.NewGuard(js, nil)
	t.Cleanup(g.Stop)
	if err := g.Watch(sc); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "GUARDED"); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 3*bus.CheckEvery, "the guard's check to recreate the stream", func() bool {
		_, err := js.Stream(ctx, "GUARDED")
		return err == nil
	})
}
