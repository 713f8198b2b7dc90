//go:build !unix

package supervise

import (
	"os"
	"syscall"
)

// groupAttr: no process groups to make here.
func groupAttr() *syscall.SysProcAttr { return nil }

// terminate can only kill where there is no SIGTERM.
func terminate(p *os.Process) { _ = p.Kill() }

// killGroup has no group to kill.
func killGroup(int) {}
