// Package confine keeps an exec agent (a process the gateway starts for a
// turn, running as the gateway's own user) away from the gateway's
// secrets: its environment, its data dir with the credentials and NATS
// seeds, and other processes.
//
// The agent is started through a launcher, the gateway's own binary run
// again with a policy in its environment: the launcher (init, before main
// runs) restricts itself with Landlock and then execs the agent, which
// keeps the restriction. Go cannot run code between fork and exec, so
// this is how a Go program confines a child without root.
package confine

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
)

// specEnv carries the launcher's Policy (JSON) from the gateway to the
// launcher, which removes it before the agent starts.
const specEnv = "SESSIONBUS_CONFINE"

// Policy is what one turn's process may touch besides SystemReadDirs,
// SystemReadFiles and DeviceFiles.
type Policy struct {
	Program    string   `json:"program"` // absolute; read and executed
	ReadDirs   []string `json:"readDirs,omitempty"`
	WriteDirs  []string `json:"writeDirs,omitempty"`
	ReadFiles  []string `json:"readFiles,omitempty"`
	WriteFiles []string `json:"writeFiles,omitempty"`
}

// SystemReadDirs are read (and executed from) by every agent: the programs,
// libraries and host configuration a script needs to run. Not /tmp (other
// turns' directories and credentials live there: a turn's TMPDIR is its
// own directory), not /home, /root, /var or /opt (anyone's data), not
// /proc or /sys.
var SystemReadDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// SystemReadFiles are the few /proc files with host-wide facts that
// runtimes read to size themselves (CPU count, memory); nothing under
// /proc/<pid>.
var SystemReadFiles = []string{"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg"}

// DeviceFiles are read and written by every agent.
var DeviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

var (
	mu        sync.Mutex
	protected []string
)

// Protect names paths no agent may be given (the data dir, the
// credentials file): Check refuses a policy path that holds one or lies
// within one. The gateway calls it at start, before its runtimes are built.
func Protect(paths ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			protected = append(protected, abs)
		}
	}
}

// Check says which protected path (see Protect) path overlaps, "" when
// none: a directory an agent may read or write must neither hold the
// gateway's secrets nor lie among them.
func Check(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range protected {
		if within(p, abs) || within(abs, p) {
			return p
		}
	}
	return ""
}

// within: path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Describe names the confinement an exec agent gets on this host without
// exec.user, for logs and the audit.
func Describe() string {
	abi := ABI()
	if abi == 0 {
		return "none: this kernel has no Landlock (Linux 5.13+ with landlock in its lsm= list)"
	}
	s := fmt.Sprintf("Landlock ABI v%d (filesystem", abi)
	if abi >= 6 {
		s += "; signals and abstract unix sockets scoped to the agent"
	}
	s += ")"
	if !Dumpable() {
		s += ", gateway not dumpable"
	}
	return s
}

// Harden is for a gateway process at start: it makes the process not
// dumpable (so no process of its user reads its /proc/<pid>/environ, mem
// or cwd), names the paths no agent may be given, and logs the
// confinement exec agents get, warning when there is none.
func Harden(log *slog.Logger, protect ...string) {
	Protect(protect...)
	if err := setNotDumpable(); err != nil {
		log.Warn("could not make the gateway not dumpable: processes of its user can read its environment and memory", "err", err)
	}
	if ABI() == 0 {
		log.Warn("exec agents cannot be confined on this host: an exec agent without exec.user can read the gateway's data dir and credentials; use a kernel with Landlock or set exec.user", "confinement", Describe())
		return
	}
	log.Info("exec agents without exec.user are confined", "confinement", Describe())
}
