package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
)

// setConfinement checks exec.readPaths and exec.writePaths and decides
// whether turns are confined: they are when they run as the gateway's own
// user (no exec.user) on a kernel with Landlock. A directory an agent
// would be given that holds the gateway's data dir or credentials (or
// lies in them) is refused, since a confined agent could read them.
func (r *execRuntime) setConfinement(key string, c execConfig) error {
	for _, l := range []struct {
		name  string
		paths []string
		to    *[]string
	}{{"readPaths", c.ReadPaths, &r.readPaths}, {"writePaths", c.WritePaths, &r.writePaths}} {
		for i, p := range l.paths {
			k := fmt.Sprintf("%s.%s[%d]", key, l.name, i)
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%s: %s is not an absolute path", k, quoteShort(p))
			}
			if st, err := os.Stat(p); err != nil || !st.IsDir() {
				return fmt.Errorf("%s: %s is not a directory", k, quoteShort(p))
			}
			if s := confine.Check(p); s != "" {
				return fmt.Errorf("%s: %s overlaps the gateway's secrets at %s; an agent given it could read them: name a directory outside the data dir", k, quoteShort(p), s)
			}
			*l.to = append(*l.to, filepath.Clean(p))
		}
	}
	if r.as != nil || confine.ABI() == 0 {
		return nil
	}
	checks := map[string]string{}
	for _, d := range confine.SystemReadDirs {
		checks[d] = "agents read the system directory " + d + "; move them out of it, or set " + key + ".user"
	}
	if c.Dir != "" {
		checks[c.Dir] = key + ".dir is the agent's working directory; give it a directory outside the data dir"
	}
	for d, why := range checks {
		if s := confine.Check(d); s != "" {
			return fmt.Errorf("%s: the gateway's secrets at %s are in reach of exec agents: %s", key, s, why)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: the gateway's own binary, which confines each turn, cannot be found: %v", key, err)
	}
	r.confined, r.self = true, self
	return nil
}

// command is the turn's process: the agent itself, or, confined, the
// launcher (the gateway's binary) that restricts itself to the turn's
// policy and then runs the agent with the same argv and environment.
func (r *execRuntime) command(ctx context.Context, x *execTurn) (*exec.Cmd, error) {
	if !r.confined {
		cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
		cmd.Env = x.env
		return cmd, nil
	}
	// resolved as exec.Cmd would, with the gateway's PATH
	prog, err := exec.LookPath(r.argv[0])
	if err == nil {
		prog, err = filepath.Abs(prog)
	}
	if err != nil {
		return nil, runErrorf("exec %s: %v", r.label, err)
	}
	p := confine.Policy{Program: prog, ReadDirs: r.readPaths,
		WriteDirs: slices.Concat([]string{x.dir}, x.remove, r.writePaths)}
	spec, err := confine.Env(p)
	if err != nil {
		return nil, runErrorf("exec %s: %v", r.label, err)
	}
	cmd := exec.CommandContext(ctx, r.self, r.argv...)
	cmd.Env = append(slices.Clip(x.env), spec)
	return cmd, nil
}
