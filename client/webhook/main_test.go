package webhook_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// The receivers' HTTP keep-alive connections outlive a test by design.
func TestMain(m *testing.M) {
	os.Exit(bustest.CheckLeaks(m.Run(), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")))
}
