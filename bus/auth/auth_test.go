package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// Keys persist per directory (credentials minted before a restart stay
// valid), accounts are added and kept, bad account names and roles are
// refused, and a worker file's issuer block is found again.
func TestDeploymentKeys(t *testing.T) {
	dir := t.TempDir()
	d1, err := auth.LoadOrCreate(dir, "A")
	if err != nil {
		t.Fatal(err)
	}
	op1, _ := d1.OperatorJWT()
	d2, err := auth.LoadOrCreate(dir, "B")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d2.Accounts(), ","); got != "A,B" {
		t.Fatalf("accounts after adding B: %s", got)
	}
	if d2.SystemAccount() != d1.SystemAccount() {
		t.Fatal("the system account changed across loads")
	}
	op2, _ := d2.OperatorJWT()
	if op1 == "" || op2 == "" {
		t.Fatal("no operator JWT")
	}
	for _, f := range []string{"operator.nk", "account-SYS.nk", "account-A.nk", "account-B.nk"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st, err)
		}
	}
	if _, err := auth.LoadOrCreate(dir, "SYS"); err == nil {
		t.Fatal("an account named SYS was accepted")
	}
	if _, err := auth.LoadOrCreate(dir, "a b"); err == nil {
		t.Fatal("an account name with a space was accepted")
	}
	if _, err := d2.Mint("C", auth.RoleAgent, "", "", 0); err == nil || !strings.Contains(err.Error(), `no account "C"`) {
		t.Fatalf("mint in an unknown account: %v", err)
	}
	if _, err := auth.ParseRole("root"); err == nil {
		t.Fatal("role root accepted")
	}
	u, err := d2.Mint("A", auth.RoleAgent, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := u.Creds()
	op, _ := bus.NewOperator()
	path := filepath.Join(t.TempDir(), "worker.creds")
	if err := os.WriteFile(path, append(b, auth.IssuerBlock(op.PublicKey())...), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if auth.FindIssuer(data) != op.PublicKey() {
		t.Fatal("issuer block not found again")
	}
	if inbox, err := auth.InboxOf(path); err != nil || inbox != u.Inbox {
		t.Fatalf("inbox of the file: %q %v, want %q", inbox, err, u.Inbox)
	}
	conf, err := d2.ServerConfig()
	if err != nil || !strings.Contains(conf, d2.SystemAccount()) || !strings.Contains(conf, "resolver: MEMORY") {
		t.Fatalf("server config: %v\n%s", err, conf)
	}
}
