package audit

import (
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
)

// execAgents are the config's exec agents, each with its exec.user ("":
// the gateway's own user).
func execAgents(c *config.Config) (ids, users []string) {
	if c == nil {
		return nil, nil
	}
	for _, a := range c.Agents.List {
		if a.Runtime != "exec" {
			continue
		}
		u, _ := a.Exec["user"].(string)
		ids, users = append(ids, a.ID), append(users, strings.TrimSpace(u))
	}
	return ids, users
}

func (t *Target) landlockABI() int {
	if t.LandlockABI != nil {
		return t.LandlockABI()
	}
	return confine.ABI()
}

// execUnconfined: an exec agent runs as the gateway's own user on a host
// whose kernel cannot confine it, so its turns can read everything the
// gateway can: the data dir, the credentials and NATS seeds.
func execUnconfined(t *Target) []Issue {
	ids, users := execAgents(t.Config)
	if len(ids) == 0 || t.landlockABI() > 0 {
		return nil
	}
	var out []Issue
	for i, id := range ids {
		if users[i] != "" {
			continue
		}
		out = append(out, Issue{
			Detail: fmt.Sprintf("Agent %s's turns run as the gateway's own user and this kernel has no Landlock: a turn can read the gateway's data dir, its credentials and NATS seeds.", id),
			Fix:    fmt.Sprintf("run the gateway on a kernel with Landlock (Linux 5.13+, landlock in its lsm= list), or set agents.list[%s].exec.user to an unprivileged user (the gateway must then run as root)", id),
		})
	}
	return out
}

// execConfinement names the confinement each exec agent's turns get, so
// an operator sees what stands between an agent and the gateway.
func execConfinement(t *Target) []Issue {
	ids, users := execAgents(t.Config)
	if len(ids) == 0 {
		return nil
	}
	abi := t.landlockABI()
	var out []Issue
	for i, id := range ids {
		switch {
		case users[i] != "":
			out = append(out, Issue{
				Detail: fmt.Sprintf("Agent %s's turns run as the OS user %q (exec.user): file permissions keep them from the gateway's files.", id, users[i]),
				Fix:    "nothing to do; keep the data dir 0700 and owned by the gateway's user",
			})
		case abi > 0:
			scoped := ""
			if abi >= 6 {
				scoped = "; signals and abstract unix sockets to processes outside the turn refused"
			}
			out = append(out, Issue{
				Detail: fmt.Sprintf("Agent %s's turns are confined by Landlock ABI v%d: system directories read-only, their own directories, exec.dir and exec.readPaths/writePaths, nothing else on disk, no /proc of other processes%s; the gateway makes itself not dumpable at start.", id, abi, scoped),
				Fix:    fmt.Sprintf("nothing to do; agents.list[%s].exec.readPaths and writePaths are all that widen it", id),
			})
		}
	}
	return out
}
