//go:build windows

package runtime

import "os/exec"

// ownGroup does nothing on Windows, which has no process groups to kill by
// id: a timed-out turn kills its command only, not what that command started.
func ownGroup(*exec.Cmd) {}

// killGroup kills the command's process.
func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
