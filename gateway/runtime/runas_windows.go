//go:build windows

package runtime

import (
	"fmt"
	"os/exec"
)

// runAs is never set on Windows, where a turn always runs as the
// gateway's user; the fields keep the shared code compiling.
type runAs struct {
	name string
	home string
}

// lookupRunAs refuses exec.user: Windows starts a process as another user
// only with that user's password or token, which the gateway does not have.
func lookupRunAs(key, _ string) (*runAs, error) {
	return nil, fmt.Errorf("%s: running turns as another user is not supported on Windows; remove %s (turns run as the gateway's user)", key, key)
}

func (u *runAs) apply(*exec.Cmd) {}

func (u *runAs) chown(string) error { return nil }
