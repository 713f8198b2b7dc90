package bus

import (
	"runtime/debug"
	"sync"
)

// Commit is the source revision of this build. A release build stamps it
// with -ldflags "-X github.com/sessionbus/sessionbus/bus.Commit=<sha>";
// otherwise BuildCommit reads the one `go build` records from git.
var Commit = ""

var buildCommit = sync.OnceValue(func() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 7 {
			return s.Value[:7]
		}
	}
	return ""
})

// BuildCommit is the short commit of this build, or "" when unknown (go
// test and go run binaries carry no revision).
func BuildCommit() string { return buildCommit() }
