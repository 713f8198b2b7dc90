package threadbindings

import (
	"errors"
	"os"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

func open(t *testing.T) *Store {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	st, err := Open(bustest.Context(t), js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A conversation's key tells apart every chat and thread, whatever their
// ids hold, and fits the bucket's key alphabet.
func TestConversationKey(t *testing.T) {
	seen := map[string]Conversation{}
	for _, c := range []Conversation{
		{Channel: "discord", AccountID: "default", To: "C1", ThreadID: "T1"},
		{Channel: "discord", AccountID: "default", To: "C1", ThreadID: "T2"},
		{Channel: "discord", AccountID: "default", To: "C1"},
		{Channel: "discord", AccountID: "work", To: "C1", ThreadID: "T1"},
		{Channel: "slack", AccountID: "default", To: "C1", ThreadID: "T1"},
		{Channel: "googlechat", AccountID: "default", To: "spaces/A", ThreadID: "spaces/A/threads/x y:z"},
		{Channel: "discord", AccountID: "default", To: "C1\x00T1"},
	} {
		k := c.Key()
		if prev, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v share key %s", prev, c, k)
		}
		seen[k] = c
		if _, err := bus.DecodeKey(k); err != nil {
			t.Fatalf("key %s of %+v: %v", k, c, err)
		}
	}
}

// Expiry is the earlier of idle (from the last activity, else the bind)
// and max age; zero timeouts never expire.
func TestExpiry(t *testing.T) {
	for _, tc := range []struct {
		b       Binding
		now     int64
		expired bool
	}{
		{Binding{BoundAt: 1000}, 1 << 60, false},
		{Binding{BoundAt: 1000, IdleTimeoutMs: 100}, 1099, false},
		{Binding{BoundAt: 1000, IdleTimeoutMs: 100}, 1100, true},
		{Binding{BoundAt: 1000, LastActivityAt: 5000, IdleTimeoutMs: 100}, 5099, false},
		{Binding{BoundAt: 1000, LastActivityAt: 5000, IdleTimeoutMs: 100, MaxAgeMs: 3000}, 4000, true},
		{Binding{BoundAt: 1000, MaxAgeMs: 3000}, 3999, false},
	} {
		if got := tc.b.Expired(tc.now); got != tc.expired {
			t.Errorf("%+v at %d: expired %v, want %v", tc.b, tc.now, got, tc.expired)
		}
	}
}

// Bind creates; the same spawn binding again (a retry) is no error;
// another session is refused unless replace lets the old one go; Unbind
// removes only its target's (and run's) binding.
func TestBindUnbind(t *testing.T) {
	st := open(t)
	ctx := bustest.Context(t)
	c := Conversation{Channel: "discord", AccountID: "default", To: "C1", ThreadID: "T1"}
	a := &Binding{Conversation: c, TargetSessionKey: "agent:main:subagent:a", RunID: "r1", BoundAt: 1}
	if err := st.Bind(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(ctx, a, nil); err != nil {
		t.Fatalf("a retry's bind: %v", err)
	}
	b := &Binding{Conversation: c, TargetSessionKey: "agent:main:subagent:b", RunID: "r2", BoundAt: 2}
	if err := st.Bind(ctx, b, func(*Binding) bool { return false }); !errors.Is(err, ErrBound) {
		t.Fatalf("a second session's bind: %v", err)
	}
	if err := st.Unbind(ctx, c, b.TargetSessionKey, ""); err != nil {
		t.Fatal(err)
	}
	if err := st.Unbind(ctx, c, a.TargetSessionKey, "other-run"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Get(ctx, c); err != nil || got.TargetSessionKey != a.TargetSessionKey {
		t.Fatalf("another target's or run's unbind removed the binding: %+v %v", got, err)
	}
	if err := st.Bind(ctx, b, func(old *Binding) bool { return old.TargetSessionKey == a.TargetSessionKey }); err != nil {
		t.Fatalf("taking over an ended binding: %v", err)
	}
	if got, _, _ := st.Get(ctx, c); got.TargetSessionKey != b.TargetSessionKey {
		t.Fatalf("after the take-over: %+v", got)
	}
	if err := st.Unbind(ctx, c, b.TargetSessionKey, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after unbind: %v", err)
	}
	if err := st.Unbind(ctx, c, b.TargetSessionKey, ""); err != nil {
		t.Fatalf("unbinding nothing: %v", err)
	}
}
