package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// CredsDir is the directory under the data dir where serve writes
// one credentials file per role.
const CredsDir = "creds"

// openBits are the mode bits that let anyone but the owner read, write or
// enter: serve creates its secrets 0600 in dirs 0700 and refuses a secrets
// dir with any of these set.
const openBits fs.FileMode = 0o077

// permsChecked is false where files have no Unix mode bits to check.
var permsChecked = runtime.GOOS != "windows"

// secretsOpen: a credentials file, a NATS key or a dir holding them that
// others may read. A credentials file connects as its role (the admin's
// and gateway's also mint caller tokens); a NATS key mints any user.
func secretsOpen(t *Target) []Issue {
	if !permsChecked {
		return nil
	}
	var out []Issue
	for _, p := range secretPaths(t) {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&openBits == 0 {
			continue
		}
		what, fix := "whoever reads it connects as its role (the admin's and gateway's files also mint caller tokens)", "chmod 600 "+p
		switch {
		case st.IsDir():
			what, fix = "it holds credentials or NATS keys, and others may enter it and read any of them whose own mode allows", "chmod 700 "+p
		case t.DataDir != "" && filepath.Dir(p) == filepath.Join(t.DataDir, auth.Dir):
			what = "whoever reads this NATS key can mint any identity on the deployment"
		}
		out = append(out, Issue{
			Detail: fmt.Sprintf("%s (mode %04o) is open to other users: %s.", p, st.Mode().Perm(), what),
			Fix:    fix,
		})
	}
	return out
}

// secretPaths are the secrets of the data dir (the creds and NATS-key
// dirs and every file in them, operator.creds) and the caller's --creds
// file, each once.
func secretPaths(t *Target) []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, filepath.Clean(p)) {
			out = append(out, filepath.Clean(p))
		}
	}
	if t.DataDir != "" {
		for _, d := range []string{filepath.Join(t.DataDir, CredsDir), filepath.Join(t.DataDir, auth.Dir)} {
			add(d)
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if !e.IsDir() {
					add(filepath.Join(d, e.Name()))
				}
			}
		}
		add(filepath.Join(t.DataDir, bus.CredsFile))
	}
	add(t.CredsPath)
	return out
}

// dataDirOpen: the data dir lets others in. The store under it is the
// server's own (0700), but a dir others may write lets them replace
// operator.creds or the NATS-key dir with keys of their own, which serve
// trusts on its next start; one they may only enter still shows them
// every name in it and exposes any secret later made readable by mistake.
func dataDirOpen(t *Target) []Issue {
	if !permsChecked || t.DataDir == "" {
		return nil
	}
	st, err := os.Stat(t.DataDir)
	if err != nil || st.Mode().Perm()&openBits == 0 {
		return nil
	}
	what := "others may enter it and list what it holds"
	if st.Mode().Perm()&0o022 != 0 {
		what = "others may write it: they can replace operator.creds or the NATS keys with their own, which serve trusts on its next start"
	}
	return []Issue{{
		Detail: fmt.Sprintf("%s (mode %04o) is open to other users: %s.", t.DataDir, st.Mode().Perm(), what),
		Fix:    fmt.Sprintf("chmod 700 %s", t.DataDir),
	}}
}

// dataDirMissing: there is no data dir where the audit looked, so its
// file checks found nothing to check; said so that a clean report from
// the wrong directory is not taken for a clean data dir.
func dataDirMissing(t *Target) []Issue {
	if t.DataDir == "" {
		return nil
	}
	if _, err := os.Stat(t.DataDir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return []Issue{{
		Detail: fmt.Sprintf("%s does not exist: the permissions of credentials, NATS keys and the store were not checked.", t.DataDir),
		Fix:    "run the audit on the server host with --data set to serve's --data",
	}}
}
