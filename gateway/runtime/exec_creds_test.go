package runtime

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// runUser issues real credentials (a NATS user of the agent role) and
// records the lifetimes asked for.
type runUser struct {
	mu    sync.Mutex
	ttls  []time.Duration
	creds []byte
	seed  string
	inbox string
	err   error
}

func newRunUser(t *testing.T) *runUser {
	t.Helper()
	d, err := auth.LoadOrCreate(t.TempDir(), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.Mint(auth.DefaultAccount, auth.RoleAgent, "run", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	return &runUser{creds: creds, seed: u.Seed, inbox: u.Inbox}
}

func (u *runUser) issue(ttl time.Duration) (*NATSUser, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ttls = append(u.ttls, ttl)
	if u.err != nil {
		return nil, u.err
	}
	return &NATSUser{Creds: u.creds, Inbox: u.inbox}, nil
}

// readDir is a directory every user may read and enter, for a turn that
// runs as another user.
func readDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A turn with a NATS user of its own gets its credentials file (0600, in
// its own directory, the same bytes the gateway issued), the path, inbox,
// token and server in its environment and on stdin, and a user that lives
// as long as the turn may plus a margin. Nothing of it is left afterwards,
// and a process that prints its seed does not get it into the run error.
func TestExecRunUser(t *testing.T) {
	out := t.TempDir()
	script := writeScript(t, out, "agent.sh", `
cat > "$OUT/stdin.json"
cp "$SESSIONBUS_CREDS" "$OUT/creds"
printf '{"reply":"%s|%s|%s|%s|%s|%s"}' "$SESSIONBUS_CREDS" "$(stat -c %a "$SESSIONBUS_CREDS")" "$HOME" "$SESSIONBUS_INBOX" "$SESSIONBUS_TOKEN" "$SESSIONBUS_SERVER"
`)
	u := newRunUser(t)
	rt := mustNew(t, execAgent([]any{script}, map[string]any{"timeoutSeconds": 5, "env": map[string]any{"out": out, "sessionbus_creds": "overridden"}, "writePaths": []any{out}}))
	turn := Turn{RunID: "run-1", NATSURL: "nats://127.0.0.1:4222", Token: "tok-123", NATSUser: u.issue}
	res, err := rt.Run(context.Background(), turn, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(res.Reply, "|")
	if len(parts) != 6 {
		t.Fatalf("reply %q", res.Reply)
	}
	path, mode, home := parts[0], parts[1], parts[2]
	if filepath.Dir(path) != home || filepath.Base(path) != credsFile || mode != "600" {
		t.Fatalf("credentials at %s mode %s, want %s in the turn's directory %s, 600", path, mode, credsFile, home)
	}
	if parts[3] != u.inbox || parts[4] != "tok-123" || parts[5] != "nats://127.0.0.1:4222" {
		t.Fatalf("environment: inbox %q token %q server %q", parts[3], parts[4], parts[5])
	}
	if got, _ := os.ReadFile(filepath.Join(out, "creds")); string(got) != string(u.creds) {
		t.Fatalf("the process read credentials %q, want the issued ones", got)
	}
	in, _ := os.ReadFile(filepath.Join(out, "stdin.json"))
	if !strings.Contains(string(in), `"natsCreds":"`+path+`"`) || !strings.Contains(string(in), `"natsInbox":"`+u.inbox+`"`) || !strings.Contains(string(in), `"token":"tok-123"`) {
		t.Fatalf("stdin %s", in)
	}
	if len(u.ttls) != 1 || u.ttls[0] <= 5*time.Second || u.ttls[0] > 5*time.Second+execWaitDelay+natsUserMargin {
		t.Fatalf("lifetimes asked for %v, want one just over the 5s timeout", u.ttls)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the credentials file outlived the turn: %v", err)
	}

	leak := writeScript(t, out, "leak.sh", `cat "$SESSIONBUS_CREDS" >&2; echo "token $SESSIONBUS_TOKEN" >&2; exit 1`)
	_, err = mustNew(t, execAgent([]any{leak}, nil)).Run(context.Background(), turn, nil)
	re := asRunError(t, err)
	if strings.Contains(re.Message, u.seed) || strings.Contains(re.Message, "tok-123") || !strings.Contains(re.Message, "[redacted]") {
		t.Fatalf("run error shows the seed or token: %s", re.Message)
	}
}

// Under exec.dir, which every turn shares, the credentials file goes to a
// directory of the turn's own, removed after it; without a NATS user there
// is no file and no SESSIONBUS_CREDS; a user that cannot be issued fails
// the turn before the process starts.
func TestExecRunUserSharedDirAndFailure(t *testing.T) {
	work := t.TempDir()
	writeScript(t, work, "agent.sh", `cat >/dev/null; touch started; printf '{"reply":"%s"}' "${SESSIONBUS_CREDS:-none}"`)
	rt := mustNew(t, execAgent([]any{"./agent.sh"}, map[string]any{"dir": work}))
	u := newRunUser(t)
	res, err := rt.Run(context.Background(), Turn{NATSUser: u.issue}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Dir(res.Reply); !strings.HasPrefix(filepath.Base(dir), "sessionbus-creds-") || strings.HasPrefix(dir, work) {
		t.Fatalf("credentials at %q, want a directory of the turn's own outside %s", res.Reply, work)
	}
	if _, err := os.Stat(filepath.Dir(res.Reply)); !os.IsNotExist(err) {
		t.Fatalf("the credentials directory outlived the turn: %v", err)
	}
	if res, err := rt.Run(context.Background(), Turn{}, nil); err != nil || res.Reply != "none" {
		t.Fatalf("turn without a NATS user: %+v %v", res, err)
	}
	_ = os.Remove(filepath.Join(work, "started"))
	u.err = errors.New("account gone")
	_, err = rt.Run(context.Background(), Turn{NATSUser: u.issue}, nil)
	wantErrContains(t, asRunError(t, err), "issue the run's NATS user", "account gone")
	if _, err := os.Stat(filepath.Join(work, "started")); !os.IsNotExist(err) {
		t.Fatal("the process started without its NATS user")
	}
}

// exec.user runs the turn as another OS user, who owns the turn's
// directory and credentials file; a user that does not exist, or a gateway
// that is not root, is refused at start-up.
func TestExecUser(t *testing.T) {
	_, err := New(execAgent([]any{"true"}, map[string]any{"user": "no-such-user-sb"}))
	wantErrContains(t, err, "agents.list[ops].exec.user: no user", "no-such-user-sb")
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this host")
	}
	dir := readDir(t)
	script := writeScript(t, dir, "agent.sh", `cat >/dev/null; printf '{"reply":"%s %s %s %s %s"}' "$(id -u)" "$(stat -c %u "$PWD")" "$(stat -c %u "$SESSIONBUS_CREDS")" "$USER" "$(id -G)"`)
	if os.Geteuid() != 0 {
		_, err := New(execAgent([]any{script}, map[string]any{"user": "nobody"}))
		wantErrContains(t, err, "agents.list[ops].exec.user: running turns as \"nobody\" needs a gateway that runs as root")
		return
	}
	for _, spec := range []any{"nobody", nobody.Uid} {
		rt := mustNew(t, execAgent([]any{script}, map[string]any{"user": spec}))
		res, err := rt.Run(context.Background(), Turn{NATSUser: newRunUser(t).issue}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(res.Reply)
		if len(f) < 5 || f[0] != nobody.Uid || f[1] != nobody.Uid || f[2] != nobody.Uid || f[3] != "nobody" || strings.Contains(" "+strings.Join(f[4:], " ")+" ", " 0 ") {
			t.Fatalf("user %v: turn ran as %q, want uid %s owning its directory and credentials, not in group 0", spec, res.Reply, nobody.Uid)
		}
	}
}
