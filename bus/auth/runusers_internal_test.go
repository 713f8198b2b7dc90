package auth

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

// The revocation list keeps a user only while its JWT could still get in:
// entries past their user's expiry go when the next one is added, and the
// account's other claims are pushed as the servers were first given them.
// A failed push keeps its entry for the next one.
func TestRunUsersListIsPruned(t *testing.T) {
	d, err := LoadOrCreate(t.TempDir(), DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	var pushed *jwt.AccountClaims
	fail := false
	ru, err := d.RunUsers(DefaultAccount, "", func(tok string) error {
		if fail {
			return errors.New("push failed")
		}
		ac, err := jwt.DecodeAccountClaims(tok)
		pushed = ac
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	ru.now = func() time.Time { return clock }
	revoke := func(runID string, ttl time.Duration) string {
		t.Helper()
		creds, _, rv, err := ru.Issue(runID, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if err := rv(); err != nil && !fail {
			t.Fatal(err)
		}
		tok, _ := jwt.ParseDecoratedJWT(creds)
		uc, _ := jwt.DecodeUserClaims(tok)
		return uc.Subject
	}
	short := revoke("short", time.Minute)
	long := revoke("long", time.Hour)
	// revoked at the list's clock (the injected one here), not at
	// time.Now(): checking IsRevoked against the real clock failed whenever
	// a second ticked between the set-up and the check
	if len(pushed.Revocations) != 2 || pushed.Revocations[short] != clock.Unix() || pushed.Revocations[long] != clock.Unix() {
		t.Fatalf("revocations %v, want %s and %s", pushed.Revocations, short, long)
	}
	want := d.accountClaims(d.accounts[DefaultAccount])
	got, _ := json.Marshal(pushed.Limits)
	wantLimits, _ := json.Marshal(want.Limits)
	if string(got) != string(wantLimits) || pushed.Name != want.Name || pushed.Issuer != d.opPub {
		t.Fatalf("pushed account %+v, want the preloaded claims %+v", pushed, want)
	}

	clock = clock.Add(2 * time.Minute) // short's JWT has expired
	next := revoke("next", time.Hour)
	if _, ok := pushed.Revocations[short]; ok || len(pushed.Revocations) != 2 || ru.Revoked() != 2 {
		t.Fatalf("revocations after short expired: %v", pushed.Revocations)
	}

	fail = true
	lost := revoke("lost", time.Hour)
	fail = false
	last := revoke("last", time.Hour)
	for _, k := range []string{long, next, lost, last} {
		if _, ok := pushed.Revocations[k]; !ok {
			t.Fatalf("revocations %v miss %s", pushed.Revocations, k)
		}
	}
}
