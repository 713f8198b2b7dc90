package auth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// What a run's own NATS user costs: minting it (a key pair and a signed
// JWT) and revoking it (the account JWT re-signed with the list and applied
// to the server, which checks every connection of the account against it),
// with the list already holding revoked users and with agents connected.
//
// go test -run '^$' -bench RunUser -benchtime 300x ./bus/auth/
func BenchmarkRunUser(b *testing.B) {
	for _, c := range []struct{ revoked, conns int }{{0, 0}, {1000, 0}, {0, 50}} {
		b.Run(fmt.Sprintf("revoked=%d/conns=%d", c.revoked, c.conns), func(b *testing.B) {
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
			for i := range c.revoked {
				_, _, revoke, err := ru.Issue(fmt.Sprint("old-", i), time.Hour)
				if err == nil {
					err = revoke()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for i := range c.conns {
				u, err := d.Mint(auth.DefaultAccount, auth.RoleAgent, fmt.Sprint("agent-", i), "", time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				nc, err := nats.Connect(s.URL(), u.Options()...)
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				_, _, revoke, err := ru.Issue(fmt.Sprint("run-", i), 11*time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := revoke(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(ru.Revoked()), "revoked-at-end")
		})
	}
}

// Runs ending together: revocations that queue behind one push share the
// next one.
//
// go test -run '^$' -bench RunUserParallel -benchtime 300x ./bus/auth/
func BenchmarkRunUserParallel(b *testing.B) {
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
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _, revoke, err := ru.Issue("run", 11*time.Minute)
			if err == nil {
				err = revoke()
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(ru.Revoked()), "revoked-at-end")
}
