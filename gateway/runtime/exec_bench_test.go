package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// An exec turn of a program that only replies, without a NATS user of its
// own and with one (minted, written, revoked on a server in operator mode,
// as serve --auth does): the difference is what per-run credentials add to
// every exec run.
//
// go test -run '^$' -bench ExecTurn -benchtime 300x ./gateway/runtime/
func BenchmarkExecTurn(b *testing.B) {
	rt, err := New(execAgent([]any{"/bin/sh", "-c", `cat >/dev/null; printf '{"reply":"ok"}'`}, nil))
	if err != nil {
		b.Fatal(err)
	}
	d, err := auth.LoadOrCreate(b.TempDir(), auth.DefaultAccount)
	if err != nil {
		b.Fatal(err)
	}
	s, err := embedded.Start(embedded.Options{DataDir: b.TempDir(), Listen: "127.0.0.1:-1", Auth: d})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	ru, err := d.RunUsers(auth.DefaultAccount, "", s.UpdateAccount)
	if err != nil {
		b.Fatal(err)
	}
	turn := Turn{SessionKey: "agent:ops:main", RunID: "run", NATSURL: s.URL(), Token: "tok"}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := rt.Run(context.Background(), turn, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runuser", func(b *testing.B) {
		for b.Loop() {
			var revoke func() error
			t := turn
			t.NATSUser = func(ttl time.Duration) (*NATSUser, error) {
				creds, inbox, rv, err := ru.Issue(t.RunID, ttl)
				revoke = rv
				return &NATSUser{Creds: creds, Inbox: inbox}, err
			}
			if _, err := rt.Run(context.Background(), t, nil); err != nil {
				b.Fatal(err)
			}
			if err := revoke(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(ru.Revoked()), "revoked-at-end")
	})
}
