//go:build unix

package supervise

import (
	"os"
	"syscall"
)

// terminate asks a child to stop as Ctrl-C or a service manager would:
// SIGTERM to the child alone, which shuts its own work down in order.
func terminate(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

// killGroup kills what is left of a child's process group (the child ran
// as its leader: Setpgid), the processes it started included.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
