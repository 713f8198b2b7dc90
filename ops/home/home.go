// Package home finds where a sessionbus deployment keeps its state on this
// machine (its data dir), and the small client config a server writes there,
// so that every command run from any folder reaches the same server with the
// same credentials and no flags.
package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Env names the data dir explicitly; it wins over every other default.
const Env = "SESSIONBUS_HOME"

// Legacy is the data dir older versions kept in the working directory.
// Where it exists it is still used, so a deployment started before the
// home moved keeps its sessions and credentials.
const Legacy = "sessionbus-data"

// Where a Home came from.
const (
	FromEnv    = "env"    // $SESSIONBUS_HOME
	FromLegacy = "legacy" // ./sessionbus-data in the working directory
	FromState  = "state"  // the platform's per-user state dir
	FromNone   = "none"   // no user home dir: ./sessionbus-data, created if need be
)

// Home is the data dir every command uses unless given --data (and whose
// client config gives --server and --creds their defaults).
type Home struct {
	Dir  string
	From string
	// State is the platform's state dir, when it could be found: what the
	// note about a legacy dir points to.
	State string
}

// Resolve finds the home: $SESSIONBUS_HOME, else ./sessionbus-data when it
// exists in the working directory, else the platform's state dir. It reads
// the environment and the working directory on each call, so it never
// fails: without a user home dir it falls back to ./sessionbus-data.
func Resolve() Home {
	state, serr := StateDir()
	if d := os.Getenv(Env); d != "" {
		return Home{Dir: d, From: FromEnv, State: state}
	}
	if st, err := os.Stat(Legacy); err == nil && st.IsDir() {
		return Home{Dir: "./" + Legacy, From: FromLegacy, State: state}
	}
	if serr != nil {
		return Home{Dir: "./" + Legacy, From: FromNone}
	}
	return Home{Dir: state, From: FromState, State: state}
}

// Note is what to tell the user about a home that is not the usual one
// (empty when there is nothing to say): a command run elsewhere will not
// find a data dir in the working directory.
func (h Home) Note() string {
	switch h.From {
	case FromLegacy:
		return fmt.Sprintf("using the data dir %s found in this folder (commands run from other folders use %s): to use it from anywhere, move it there or set %s=%s", h.Dir, h.State, Env, abs(h.Dir))
	case FromNone:
		return fmt.Sprintf("no home dir to keep state in: using %s in this folder; set %s to choose a data dir", h.Dir, Env)
	}
	return ""
}

// StateDir is the per-user dir sessionbus keeps its state in when
// $SESSIONBUS_HOME is not set: $XDG_STATE_HOME/sessionbus, else
// ~/.local/state/sessionbus (Linux and other Unix systems, the XDG base
// directory rule); ~/Library/Application Support/sessionbus on macOS;
// %LocalAppData%\sessionbus on Windows (state that is not roamed).
func StateDir() (string, error) {
	switch runtime.GOOS {
	case "darwin", "ios":
		d, err := os.UserConfigDir() // ~/Library/Application Support
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "sessionbus"), nil
	case "windows":
		d, err := os.UserCacheDir() // %LocalAppData%
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "sessionbus"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sessionbus"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if h == "" {
		return "", errors.New("no home dir")
	}
	return filepath.Join(h, ".local", "state", "sessionbus"), nil
}

// abs is p made absolute, or p when the working directory is unknown.
func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
