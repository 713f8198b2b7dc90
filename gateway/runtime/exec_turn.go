package runtime

import (
	"cmp"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
)

// natsUserMargin is how much longer than the turn's deadline its NATS user
// lives: a backstop for a revocation that never comes (the gateway died
// mid-turn), not time the process may use.
const natsUserMargin = 30 * time.Second

// credsFile is the name of the run's credentials file in its directory.
const credsFile = "nats.creds"

// execTurn is what one turn's process gets besides its stdin: its working
// directory and environment, its credentials file, and what goes after it.
type execTurn struct {
	dir   string // its working directory
	home  string // its HOME and TMPDIR: the turn's own directory, "" under exec.dir
	tmp   string // under exec.dir, a confined turn's TMPDIR and credentials directory
	env   []string
	creds string // the credentials file, "" without a NATS user
	inbox string
	// secrets are scrubbed from everything the turn leaves behind: the run
	// token and the NATS user's seed
	secrets []string
	remove  []string // directories removed after the turn
}

func (x *execTurn) cleanup() {
	for _, d := range x.remove {
		_ = os.RemoveAll(d)
	}
}

// prepare makes the turn's directory, writes its credentials file when the
// turn has a NATS user of its own (living until deadline, plus a margin)
// and builds its environment. On an error nothing is left behind.
func (r *execRuntime) prepare(t Turn, deadline time.Time) (*execTurn, error) {
	x := &execTurn{dir: r.dir, secrets: []string{t.Token}}
	var err error
	if x.dir == "" {
		// a directory of the turn's own, removed after it: not the
		// gateway's working directory, which by default holds the data
		// dir (credentials, keys)
		x.dir, err = r.ownDir("sessionbus-run-", x)
		x.home = x.dir
	} else if r.confined {
		// a confined turn may not write /tmp, which holds other turns'
		// directories: its TMPDIR is a directory of its own
		x.tmp, err = r.ownDir("sessionbus-creds-", x)
	}
	if err == nil && t.NATSUser != nil {
		err = r.writeCreds(t, deadline, x)
	}
	if err != nil {
		x.cleanup()
		return nil, err
	}
	x.env = childEnv(x.home, r.as, r.env)
	if x.tmp != "" {
		x.env = append(x.env, "TMPDIR="+x.tmp)
	}
	x.env = append(x.env, turnVars(t, x)...)
	return x, nil
}

// ownDir makes a directory only the turn's user may enter (0700, given to
// exec.user), removed after the turn.
func (r *execRuntime) ownDir(pattern string, x *execTurn) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", runErrorf("exec %s: make the turn's directory: %v", r.label, err)
	}
	x.remove = append(x.remove, d)
	if err := r.as.chown(d); err != nil {
		return "", runErrorf("exec %s: give the turn's directory to %s: %v", r.label, r.as.name, err)
	}
	return d, nil
}

// writeCreds issues the turn's NATS user and writes its credentials file,
// 0600 and owned by the turn's user, into the turn's own directory, or,
// when the turn runs in exec.dir (shared by every turn), into a directory
// of its own.
func (r *execRuntime) writeCreds(t Turn, deadline time.Time, x *execTurn) error {
	u, err := t.NATSUser(time.Until(deadline) + execWaitDelay + natsUserMargin)
	if err != nil {
		return runErrorf("exec %s: issue the run's NATS user: %v", r.label, err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(u.Creds)
	if err != nil {
		return runErrorf("exec %s: the run's NATS credentials hold no user: %v", r.label, err)
	}
	seed, _ := kp.Seed()
	x.secrets = append(x.secrets, string(seed))
	dir := cmp.Or(x.home, x.tmp)
	if dir == "" {
		if dir, err = r.ownDir("sessionbus-creds-", x); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, credsFile)
	if err := os.WriteFile(path, u.Creds, 0o600); err != nil {
		return runErrorf("exec %s: write the run's credentials: %v", r.label, err)
	}
	if err := r.as.chown(path); err != nil {
		return runErrorf("exec %s: give the run's credentials to %s: %v", r.label, r.as.name, err)
	}
	x.creds, x.inbox = path, u.Inbox
	return nil
}

// turnVars say how to reach the bus as the turn's run, for programs that
// read the environment (stdin carries the same): they come last, so an
// exec.env entry of the same name does not replace the run's own.
func turnVars(t Turn, x *execTurn) []string {
	var out []string
	if t.NATSURL != "" {
		out = append(out, "SESSIONBUS_SERVER="+t.NATSURL)
	}
	if t.Token != "" {
		out = append(out, "SESSIONBUS_TOKEN="+t.Token)
	}
	if x.creds != "" {
		out = append(out, "SESSIONBUS_CREDS="+x.creds, "SESSIONBUS_INBOX="+x.inbox)
	}
	return out
}

// scrubAll is scrub for each secret.
func scrubAll(s string, secrets []string) string {
	for _, k := range secrets {
		s = scrub(s, k)
	}
	return s
}

func longest(ss []string) int {
	n := 0
	for _, s := range ss {
		n = max(n, len(s))
	}
	return n
}
