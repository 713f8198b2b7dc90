package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The launcher runs as soon as this package is initialised, in any binary
// that links it (sessionbus, a test binary), before main: it never
// returns.
func init() {
	if spec, ok := os.LookupEnv(specEnv); ok {
		launch(spec)
	}
}

// ABI is the Landlock ABI version the kernel offers, 0 when it has none.
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

func setNotDumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// Dumpable says whether this process is dumpable (same-user processes may
// read its /proc/<pid> files).
func Dumpable() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return err != nil || v != 0
}

// Env is the variable that makes the gateway's binary, run with the
// agent's argv, the launcher for p.
func Env(p Policy) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	return specEnv + "=" + string(b), nil
}

// launch restricts this process to the policy in spec and execs its
// program with os.Args[1:]; on any failure it exits 126 (as a shell does
// for a command it cannot run), saying why on stderr.
func launch(spec string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "sessionbus: confining the exec agent: %v\n", err)
		os.Exit(126)
	}
	os.Unsetenv(specEnv)
	var p Policy
	if err := json.Unmarshal([]byte(spec), &p); err != nil {
		fail(fmt.Errorf("bad policy: %v", err))
	}
	if len(os.Args) < 2 || p.Program == "" {
		fail(errors.New("no program to run"))
	}
	if err := restrict(p); err != nil {
		fail(err)
	}
	err := syscall.Exec(p.Program, os.Args[1:], os.Environ())
	fail(fmt.Errorf("exec %s: %v", p.Program, err))
}

// restrict applies p to this process, as strongly as the kernel allows:
// files (reads, writes, executes, ioctls on devices) and, from ABI v6,
// signals and abstract unix sockets to processes outside the agent's own
// domain. TCP is not restricted: the agent reaches the bus over it.
func restrict(p Policy) error {
	rules := []landlock.Rule{
		landlock.RODirs(SystemReadDirs...).IgnoreIfMissing(),
		landlock.ROFiles(SystemReadFiles...).IgnoreIfMissing(),
		landlock.RWFiles(DeviceFiles...).IgnoreIfMissing(),
		landlock.ROFiles(p.Program),
	}
	if len(p.ReadDirs) > 0 {
		rules = append(rules, landlock.RODirs(p.ReadDirs...))
	}
	if len(p.WriteDirs) > 0 {
		rules = append(rules, landlock.RWDirs(p.WriteDirs...))
	}
	if len(p.ReadFiles) > 0 {
		rules = append(rules, landlock.ROFiles(p.ReadFiles...))
	}
	if len(p.WriteFiles) > 0 {
		rules = append(rules, landlock.RWFiles(p.WriteFiles...))
	}
	if err := landlock.V9.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("landlock paths: %v", err)
	}
	if err := landlock.V9.BestEffort().RestrictScoped(); err != nil {
		return fmt.Errorf("landlock scopes: %v", err)
	}
	return nil
}
