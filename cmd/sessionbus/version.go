package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus"
)

// cmdVersion prints what a bug report needs: sessionbus's release, the
// commit it was built from and the nats-server `serve` embeds.
func cmdVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sessionbus version")
		fmt.Fprintln(stderr, "Prints the sessionbus version, the commit it was built from and the embedded nats-server version.")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	commit := bus.BuildCommit()
	if commit == "" {
		commit = pseudoVersionCommit()
	}
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(stdout, "sessionbus %s\ncommit %s\nnats-server %s\n%s\n", moduleVersion(), commit, server.VERSION, runtime.Version())
	return 0
}

// moduleVersion is bus.Version, plus the module version `go install
// …@vX.Y.Z` records when it differs (a pseudo-version for @latest of an
// untagged commit), so an installed binary says exactly what was installed.
func moduleVersion() string {
	v := bus.Version
	if info, ok := debug.ReadBuildInfo(); ok {
		if mv := info.Main.Version; mv != "" && mv != "(devel)" && mv != "v"+v {
			v += " (module " + mv + ")"
		}
	}
	return v
}

// pseudoVersionCommit is the commit a `go install …@latest` of an untagged
// commit names in its pseudo-version (v0.0.0-20261203150000-0123456789ab):
// such a build records no VCS settings, only the module version.
func pseudoVersionCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := strings.TrimSuffix(info.Main.Version, "+incompatible")
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 || strings.Count(v, "-") < 2 {
		return ""
	}
	rev := v[i+1:]
	for _, c := range rev {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return rev[:7]
}
