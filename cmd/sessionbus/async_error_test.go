package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestAsyncErrorSkipsRefusedConsumerDelete: an ops reader's refused
// clean-up of its own watch consumer is not printed; every other
// asynchronous error still is.
func TestAsyncErrorSkipsRefusedConsumerDelete(t *testing.T) {
	printed := func(err error) string {
		r, w, perr := os.Pipe()
		if perr != nil {
			t.Fatal(perr)
		}
		old := os.Stderr
		os.Stderr = w
		asyncError(nil, nil, err)
		os.Stderr = old
		_ = w.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	del := fmt.Errorf("%w: Permissions Violation for Publish to \"$JS.API.CONSUMER.DELETE.KV_runs.3cax0h1b\"", nats.ErrPermissionViolation)
	if got := printed(del); got != "" {
		t.Errorf("refused consumer delete printed %q", got)
	}
	pub := fmt.Errorf("%w: Permissions Violation for Publish to \"sb.tool.sessions_list\"", nats.ErrPermissionViolation)
	if got := printed(pub); !strings.Contains(got, "sb.tool.sessions_list") {
		t.Errorf("another permission violation printed %q", got)
	}
	if got := printed(nats.ErrSlowConsumer); !strings.Contains(got, "slow consumer") {
		t.Errorf("slow consumer printed %q", got)
	}
}
