package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessionbus/sessionbus/ops/demo"
)

// settleDataDir runs once the server holds the data dir: serve --demo
// marks a dir it created (or emptied) as the demo's own, so the next
// serve --demo starts it over; a serve without --demo removes that mark,
// so the sessions it keeps there are never removed by a later demo.
func (f serveFlags) settleDataDir(dd demo.DataDir, log *slog.Logger) error {
	if f.demo {
		return dd.Claim()
	}
	removed, err := demo.Disown(f.data)
	if removed {
		log.Info("the data dir is no longer the demo's own: serve --demo will not start it over", "data", f.data, "removed", filepath.Join(f.data, demo.MarkerFile))
	}
	return err
}

// selfCommand is how the user ran this binary, for the commands the demo
// prints: "go run ./cmd/sessionbus" under go run (its binary is in a
// go-build temp dir), the name alone when found on $PATH, else the path
// as typed.
func selfCommand() string {
	if exe, err := os.Executable(); err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/sessionbus"
	}
	self := os.Args[0]
	if !strings.ContainsRune(self, os.PathSeparator) && !strings.ContainsRune(self, '/') {
		return self
	}
	if strings.ContainsAny(self, " '\"$\\") {
		return "'" + strings.ReplaceAll(self, "'", `'\''`) + "'"
	}
	return self
}
