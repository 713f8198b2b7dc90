//go:build !linux

package confine

import "errors"

// ABI is 0: Landlock is Linux's.
func ABI() int { return 0 }

func setNotDumpable() error { return nil }

// Dumpable: other systems have no such switch here.
func Dumpable() bool { return true }

// Env fails: there is no launcher off Linux.
func Env(Policy) (string, error) { return "", errors.New("confinement needs Linux") }
