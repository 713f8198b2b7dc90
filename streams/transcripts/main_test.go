package transcripts

import (
	"os"
	"testing"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	benchShutdown() // the benchmark fixture outlives single benchmarks
	os.Exit(bustest.CheckLeaks(code))
}
