//go:build !windows

package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// runAs is the OS user exec.user names: a turn's process runs with its
// uid, the primary group of its passwd entry and its other groups, and
// owns the turn's directory and credentials file.
type runAs struct {
	name string
	home string
	cred *syscall.Credential
}

// lookupRunAs resolves exec.user (key) at start-up: a user name, or a
// numeric uid that has a passwd entry. Switching users needs root, so a
// gateway that is not root refuses it instead of failing every turn.
func lookupRunAs(key, spec string) (*runAs, error) {
	spec = strings.TrimSpace(spec)
	u, err := user.Lookup(spec)
	if err != nil {
		if _, nerr := strconv.ParseUint(spec, 10, 32); nerr == nil {
			u, err = user.LookupId(spec)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: no user %s on this host; give a user name or a numeric uid that has a passwd entry", key, quoteShort(spec))
	}
	if euid := os.Geteuid(); euid != 0 {
		return nil, fmt.Errorf("%s: running turns as %s needs a gateway that runs as root (this one runs as uid %d); start it as root or remove %s", key, quoteShort(spec), euid, key)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%s: user %s has uid %q and gid %q, not numbers", key, quoteShort(spec), u.Uid, u.Gid)
	}
	// its own groups only: without Groups the process would keep none,
	// and it must never keep the gateway's
	groups := []uint32{uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != uint32(gid) {
				groups = append(groups, uint32(g))
			}
		}
	}
	return &runAs{name: u.Username, home: u.HomeDir,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}, nil
}

// apply makes cmd run as u; after ownGroup, which sets SysProcAttr.
func (u *runAs) apply(cmd *exec.Cmd) {
	if u != nil {
		cmd.SysProcAttr.Credential = u.cred
	}
}

// chown gives path to u.
func (u *runAs) chown(path string) error {
	if u == nil {
		return nil
	}
	return os.Chown(path, int(u.cred.Uid), int(u.cred.Gid))
}
