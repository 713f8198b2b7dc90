package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A console started with credentials of a role that cannot run it stops
// at once and names the role it needs; one on a non-loopback address of a
// bus without auth is a usage error.
func TestConsoleRefusesWrongRoleAndOpenAddress(t *testing.T) {
	ops := bustest.RoleCreds(t, bustest.Deployment(t), auth.RoleOps)
	var out, errb bytes.Buffer
	if code := run([]string{"console", "--creds", ops, "--server", "nats://127.0.0.1:1"}, nil, &out, &errb); code != 1 {
		t.Fatalf("console with ops creds: exit %d, stderr %s", code, errb.String())
	}
	if s := errb.String(); !strings.Contains(s, "ops role's") || !strings.Contains(s, "admin role's") {
		t.Fatalf("stderr does not name the roles: %s", s)
	}
	errb.Reset()
	// the token key alone, as serve --insecure writes operator.creds
	noUser := t.TempDir() + "/operator.creds"
	if err := bustest.Operator(t).WriteCreds(noUser); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"console", "--creds", noUser, "--listen", "0.0.0.0:4280"}, nil, &out, &errb); code != 2 {
		t.Fatalf("console on 0.0.0.0 without auth: exit %d, stderr %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "loopback") {
		t.Fatalf("stderr: %s", errb.String())
	}
	errb.Reset()
	if code := run([]string{"serve", "--insecure", "--console", "0.0.0.0:4280"}, nil, &out, &errb); code != 2 {
		t.Fatalf("serve --insecure --console 0.0.0.0: exit %d, stderr %s", code, errb.String())
	}
}

// A sign-in link is for admin or ops, for a positive time: anything else
// is a usage error before anything connects.
func TestConsoleOpenFlags(t *testing.T) {
	for _, args := range [][]string{{"--open", "--role", "root"}, {"--open", "--link-ttl", "0s"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"console", "--server", "nats://127.0.0.1:1"}, args...), nil, &out, &errb); code != 2 {
			t.Fatalf("console %v: exit %d, stderr %s", args, code, errb.String())
		}
		if !strings.Contains(errb.String(), "give ") {
			t.Fatalf("console %v: stderr %s does not say what to give", args, errb.String())
		}
	}
}
