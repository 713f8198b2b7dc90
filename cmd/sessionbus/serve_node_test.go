package main

import (
	"strings"
	"testing"
	"time"
)

// TestServeNodeRefusals: --node needs --cluster and a node of it; up
// refuses what cannot run on one machine. Each is exit 2 with one line
// that says what to change, before anything starts.
func TestServeNodeRefusals(t *testing.T) {
	data := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--data", data, "--node", "2"}, "--node goes with --cluster N"},
		{[]string{"serve", "--data", data, "--cluster", "3", "--node", "4"}, "--node 4: pick a node from 1 to 3"},
		{[]string{"serve", "--data", data, "--cluster", "3", "--node", "-1"}, "--node -1: pick a node from 1 to 3"},
		{[]string{"up", "--data", data, "--nodes", "2"}, "--nodes 2: use an odd number of nodes"},
		{[]string{"up", "--data", data, "--listen", "10.1.2.3:4222"}, "on loopback"},
		{[]string{"up", "--data", data, "--workers", "0"}, "run 1 or more workers"},
		{[]string{"up", "--data", data, "extra"}, "up takes flags only"},
	} {
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() { done <- run(c.args, strings.NewReader(""), &out, &errb) }()
		var code int
		select {
		case code = <-done:
		case <-time.After(time.Minute):
			// a command line that should be refused started something
			t.Fatalf("%v: not refused within a minute: it runs\n%s", c.args, errb.String())
		}
		if code != 2 || !strings.Contains(errb.String(), c.want) || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errb.String(), c.want)
		}
	}
}
