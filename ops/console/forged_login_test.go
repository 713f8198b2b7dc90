package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// An attacker who reads any credentials file the deployment hands out
// (agent.creds, an adapter's, a run's nats.creds) learns the account's
// public key. It signs a user JWT with an account key of its own, names the
// deployment's account as IssuerAccount and tags itself with a role: the
// signature checks out against the key the JWT names, so only a check of the
// issuer against the account (as the server makes) refuses it.
func TestForgedCredsRefusedAtLogin(t *testing.T) {
	f := newFixture(t)
	anon := f.client("")
	account := f.stack.Server.Deployment().AccountKey(auth.DefaultAccount)
	forge := func(t *testing.T, tags []string, signer nkeys.KeyPair, issuerAccount string) string {
		t.Helper()
		user, _ := nkeys.CreateUser()
		pub, _ := user.PublicKey()
		seed, _ := user.Seed()
		uc := jwt.NewUserClaims(pub)
		uc.Name = "intruder"
		uc.IssuerAccount = issuerAccount
		uc.Tags.Add(tags...)
		uc.Permissions = auth.Permissions(auth.RoleAdmin, bus.NewNames(f.stack.Config.Bus.Prefix), auth.InboxPrefix(pub))
		tok, err := uc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(tok, seed)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	own, _ := nkeys.CreateAccount()
	for _, role := range auth.Roles {
		creds := forge(t, []string{"role:" + string(role)}, own, account)
		if code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": creds}, false); code != 401 {
			t.Fatalf("forged %s creds (own account key, deployment account as IssuerAccount): %d %s, want 401", role, code, body)
		}
	}
	// and no cookie came back with any of them: the sessions stay closed
	if code, _ := f.do(anon, "GET", "/api/sessions", nil, false); code != 401 {
		t.Fatalf("sessions after the forged logins: %d, want 401", code)
	}

	// A genuine admin file logs in until its user is revoked in the
	// account, then is refused; a fresh file still logs in.
	creds := f.credsText(auth.RoleAdmin)
	f.client(creds)
	tok, err := jwt.ParseDecoratedJWT([]byte(creds))
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := f.stack.Server.Deployment().RunUsers(auth.DefaultAccount, f.stack.Config.Bus.Prefix, f.stack.Server.UpdateAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := ru.Revoke(uc.Subject, time.Now().Add(time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": creds}, false)
	if code != 401 || !strings.Contains(body, "revoked") {
		t.Fatalf("login with a revoked admin's file: %d %s, want 401 naming the revocation", code, body)
	}
	f.client(f.credsText(auth.RoleAdmin))
}
