package deliveries

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// SB_DELIVER is bounded by age, a re-published delivery id is stored once,
// and a channel name that is no subject token still gets one subject.
func TestDeliveriesBoundedAndDeduped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	names := bus.NewNames("")
	d, err := Open(ctx, js, names, WithMaxAge(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != 48*time.Hour || info.Config.Name != "SB_DELIVER" {
		t.Fatalf("stream config %+v", info.Config)
	}
	msg := Delivery{Channel: "odd.chan nel", To: "x", Message: "hi", SessionKey: "agent:main:main", RunID: "r1"}
	for range 2 {
		if err := d.Publish(ctx, msg, "r1:announce"); err != nil {
			t.Fatal(err)
		}
	}
	last, err := d.st.GetLastMsgForSubject(ctx, names.Deliver("odd_chan_nel"))
	if err != nil {
		t.Fatal(err)
	}
	var got Delivery
	if err := json.Unmarshal(last.Data, &got); err != nil || got != msg {
		t.Fatalf("stored %+v %v", got, err)
	}
	if info, _ := d.st.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("%d messages, want 1 (deduped)", info.State.Msgs)
	}
}
