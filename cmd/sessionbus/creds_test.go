package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A secrets dir others may read is refused with the chmod that fixes it;
// an owner-only one passes.
func TestCheckPrivateDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX mode bits")
	}
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkPrivateDir(dir); err != nil {
		t.Fatalf("0700: %v", err)
	}
	for _, mode := range []os.FileMode{0o750, 0o705, 0o755} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		err := checkPrivateDir(dir)
		if err == nil || !strings.Contains(err.Error(), "chmod 700 "+dir) {
			t.Fatalf("%04o: %v, want a refusal naming chmod 700", mode, err)
		}
	}
}

// Credentials the server will not take get an error that says what to do:
// a worker or gateway started with an outside role's file is refused
// before it connects, naming the file and the one to use; a user that
// expired, and one of another deployment, are told apart at connect.
func TestBadCredentials(t *testing.T) {
	s := bustest.Server(t)
	d := s.Deployment()
	for _, cmd := range []string{"worker", "gateway"} {
		for _, role := range []auth.Role{auth.RoleAgent, auth.RoleAdapter, auth.RoleOps} {
			creds := bustest.RoleCreds(t, d, role)
			var stdout, stderr strings.Builder
			code := run([]string{cmd, "--server", s.URL(), "--creds", creds}, strings.NewReader(""), &stdout, &stderr)
			want := "are the " + string(role) + " role's: a " + cmd + " needs DATA/creds/" + cmd + ".creds"
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Fatalf("%s with %s creds: exit %d %q, want exit 1 and %q", cmd, role, code, stderr.String(), want)
			}
		}
	}

	u, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "short-lived", "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := u.Creds()
	expired := filepath.Join(t.TempDir(), "expired.creds")
	if err := os.WriteFile(expired, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var last string
	bustest.WaitFor(t, 15*time.Second, "the user to expire", func() bool {
		nc, err := connect(s.URL(), "test", credsOptions(expired)...)
		if err != nil {
			last = err.Error()
		} else {
			nc.Close()
		}
		return err != nil && strings.Contains(last, "the NATS user expired")
	})
	if !strings.Contains(last, "sessionbus creds ROLE") {
		t.Fatalf("expired credentials: %s", last)
	}

	foreign := bustest.RoleCreds(t, bustest.Deployment(t), auth.RoleAdmin)
	nc, err := connect(s.URL(), "test", credsOptions(foreign)...)
	if err == nil {
		nc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "credentials of its own deployment") {
		t.Fatalf("another deployment's credentials: %v", err)
	}
}
