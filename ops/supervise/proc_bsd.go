//go:build unix && !linux

package supervise

import "syscall"

// groupAttr starts a child as the leader of a process group of its own, so
// a Ctrl-C at the terminal reaches only the supervisor (which stops the
// children in order) and the group can be killed whole.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
