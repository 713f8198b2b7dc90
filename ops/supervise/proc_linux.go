//go:build linux

package supervise

import "syscall"

// groupAttr starts a child as the leader of a process group of its own, so
// a Ctrl-C at the terminal reaches only the supervisor (which stops the
// children in order) and the group can be killed whole; if the supervisor
// dies without stopping it, the kernel sends the child SIGTERM.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
