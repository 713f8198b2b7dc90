package bustest

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// CheckLeaks is what a TestMain exits with after m.Run returned code: code,
// or 1 when the tests passed but left goroutines running (goleak), listed
// on stderr. After a failure it reports nothing more: a failed test may
// leave its servers behind, and the failure already says what went wrong.
// opts are goleak's, for a package whose tests leave a goroutine of the
// standard library behind by design (an HTTP keep-alive connection).
func CheckLeaks(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
		return 1
	}
	return 0
}
