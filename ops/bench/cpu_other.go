//go:build !unix

package bench

import "time"

// processCPU is not measured here; results then carry no cpu_us_per_op.
func processCPU() time.Duration { return 0 }
