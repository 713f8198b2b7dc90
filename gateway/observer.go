package gateway

// Observer is told what a gateway does, for metrics. Its methods run on the
// gateway's own goroutines, so they must be quick and must not block.
type Observer interface {
	// RunStarted and RunDone bracket every run request an executor takes;
	// outcome is "ok", "busy" (another run held the session: retried
	// later), "failed" (the attempt failed; retried or recorded failed),
	// "stopping" or "malformed".
	RunStarted()
	RunDone(outcome string)
	// Redelivered is a run request the server delivered again (an earlier
	// delivery was nak'd, for a busy session or a failure, or its gateway
	// died before acking it).
	Redelivered()
	// Delivered is one delivery attempt of an announce or a notice (kind
	// "announce" or "notice") that this gateway claimed: err is nil when
	// the carrying run was queued.
	Delivered(kind string, err error)
}

// nopObserver observes nothing: the gateway's default.
type nopObserver struct{}

func (nopObserver) RunStarted()             {}
func (nopObserver) RunDone(string)          {}
func (nopObserver) Redelivered()            {}
func (nopObserver) Delivered(string, error) {}
