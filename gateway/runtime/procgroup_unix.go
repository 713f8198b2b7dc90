//go:build !windows

package runtime

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the command in a process group of its own, so the
// whole turn (the command and anything it started) can be killed at once.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the command's process group. Negative pid: the whole
// group; pgid == pid because of Setpgid. The group id cannot have been
// reused while any member lives; ESRCH when none does.
func killGroup(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
