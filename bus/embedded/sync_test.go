package embedded_test

import (
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/embedded"
)

func TestParseSync(t *testing.T) {
	for in, want := range map[string]embedded.Sync{
		"always": embedded.AlwaysSync, "ALWAYS": embedded.AlwaysSync,
		"2m": embedded.LazySync, "150ms": {Interval: 150 * time.Millisecond},
	} {
		got, err := embedded.ParseSync(in)
		if err != nil || got != want {
			t.Errorf("ParseSync(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "never", "0", "-1m", "2"} {
		if _, err := embedded.ParseSync(in); err == nil {
			t.Errorf("ParseSync(%q): no error", in)
		}
	}
	if embedded.AlwaysSync.String() != "always" || embedded.LazySync.String() != "2m0s" {
		t.Errorf("String: %q, %q", embedded.AlwaysSync, embedded.LazySync)
	}
}

// The zero Options flush every write: safe unless asked otherwise.
func TestStartSyncs(t *testing.T) {
	for _, c := range []struct {
		opts     embedded.Options
		always   bool
		interval time.Duration
	}{
		{embedded.Options{}, true, 0},
		{embedded.Options{Sync: embedded.LazySync}, false, 2 * time.Minute},
		{embedded.Options{Sync: embedded.Sync{Interval: time.Second}}, false, time.Second},
		{embedded.Options{Sync: embedded.LazySync, SyncAlways: true}, true, 0},
	} {
		c.opts.DataDir, c.opts.Listen = t.TempDir(), "127.0.0.1:-1"
		s, err := embedded.Start(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		js := s.NS.JetStreamConfig()
		s.Shutdown()
		if js.SyncAlways != c.always || (!c.always && js.SyncInterval != c.interval) {
			t.Errorf("%+v: server SyncAlways %v interval %v; want %v %v", c.opts.Sync, js.SyncAlways, js.SyncInterval, c.always, c.interval)
		}
	}
}
