package main

import (
	"errors"
	"flag"

	"github.com/sessionbus/sessionbus/bus/embedded"
)

// syncFlags adds --sync (always | DURATION, default always) to a command
// that runs an embedded server, and --sync-always, the older flag, kept as
// an alias of --sync always. The returned func reads them after Parse.
func syncFlags(fs *flag.FlagSet) func() (embedded.Sync, error) {
	value := fs.String("sync", "always", `when JetStream flushes writes to disk: "always" (every write, before it is acknowledged; survives an OS crash or power loss) or a duration such as 2m (nats-server's lazy default: faster, loses the last writes on a crash)`)
	always := fs.Bool("sync-always", false, "same as --sync always (the default; kept for older scripts)")
	return func() (embedded.Sync, error) {
		s, err := embedded.ParseSync(*value)
		if err != nil {
			return s, err
		}
		if *always && !s.Always() {
			return s, errors.New("--sync-always contradicts --sync " + *value + ": pass only one of them")
		}
		return s, nil
	}
}
