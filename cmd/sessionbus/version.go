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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	fmt.Fprintf(stdout, "sessionbus %s\ncommit %s\nnats-server %s\n%s\n", moduleVersion(), commitLine(bus.Commit, info), server.VERSION, runtime.Version())
	return 0
}

// noVCS is what the commit line says when the build recorded no commit:
// `go build` stamps one only in a git checkout with -buildvcs not false
// (GOFLAGS may set it false), and `go run` and `go test` binaries never do.
const noVCS = "unknown (built without VCS stamping: go build -buildvcs=true from a git clone)"

// commitLine is the commit line of `version`: the commit a release build
// stamped (-ldflags -X bus.Commit), else the one `go build` recorded with
// its time and whether the tree had uncommitted changes, else the one a
// `go install …@version` pseudo-version names, else noVCS.
func commitLine(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return noVCS
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; len(rev) >= 7 {
		line := rev[:7]
		if t := vcs["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		if vcs["vcs.modified"] == "true" {
			line += " with uncommitted changes"
		}
		return line
	}
	if rev := pseudoVersionCommit(info.Main.Version); rev != "" {
		return rev + " (from the module version " + info.Main.Version + ")"
	}
	return noVCS
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
func pseudoVersionCommit(version string) string {
	v := strings.TrimSuffix(strings.TrimSuffix(version, "+dirty"), "+incompatible")
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
