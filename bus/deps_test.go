package bus_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Client-side packages never link nats-server: a worker, a gateway or any
// program built on these packages talks to a server over a connection. Only
// bus/embedded (and the test helpers that start servers) import it.
func TestClientPackagesDoNotLinkTheServer(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "../bus", "../kv/...", "../streams/...", "../objects/...", "../notices", "../spawns", "../submit", "../importer", "../stores", "../handlers/...", "../gateway/...")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "nats-server") {
			t.Errorf("a client-side package depends on %s", pkg)
		}
	}
}
