package bus_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules"
)

// An input fault anywhere in an error's chain is the caller's 400 with its
// text; any other error, nil included, is returned as it is.
func TestThrown(t *testing.T) {
	in := &rules.InputError{Msg: "limit must be a positive integer"}
	for _, err := range []error{in, fmt.Errorf("read params: %w", in)} {
		e, ok := bus.AsError(bus.Thrown(err))
		if !ok || e.Code != bus.CodeBadRequest || e.Message != in.Msg {
			t.Fatalf("Thrown(%v) = %v, want a 400 %q", err, e, in.Msg)
		}
	}
	other := errors.New("store down")
	if got := bus.Thrown(other); got != other {
		t.Fatalf("Thrown(other) = %v", got)
	}
	if got := bus.Thrown(nil); got != nil {
		t.Fatalf("Thrown(nil) = %v", got)
	}
}
