package bench

import (
	"math"
	"runtime/metrics"
	"time"
)

// gcSnap is the garbage collector's counters at one moment.
type gcSnap struct {
	pauses        *metrics.Float64Histogram
	gcCPU, allCPU float64
	cycles        uint64
}

var gcMetrics = []string{"/sched/pauses/total/gc:seconds", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds", "/gc/cycles/total:gc-cycles"}

func readGC() gcSnap {
	s := make([]metrics.Sample, len(gcMetrics))
	for i, n := range gcMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	var g gcSnap
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		g.pauses = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		g.gcCPU = s[1].Value.Float64()
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		g.allCPU = s[2].Value.Float64()
	}
	if s[3].Value.Kind() == metrics.KindUint64 {
		g.cycles = s[3].Value.Uint64()
	}
	return g
}

// gcDelta is what the collector did between two snapshots.
type gcDelta struct {
	cycles   int
	pauseP99 time.Duration
	cpuShare float64
}

func (g gcSnap) since(before gcSnap) gcDelta {
	d := gcDelta{cycles: int(g.cycles - before.cycles)}
	if cpu := g.allCPU - before.allCPU; cpu > 0 {
		d.cpuShare = (g.gcCPU - before.gcCPU) / cpu
	}
	if g.pauses == nil || before.pauses == nil || len(g.pauses.Counts) != len(before.pauses.Counts) {
		return d
	}
	var total uint64
	counts := make([]uint64, len(g.pauses.Counts))
	for i := range counts {
		counts[i] = g.pauses.Counts[i] - before.pauses.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return d
	}
	want := uint64(math.Ceil(0.99 * float64(total)))
	var seen uint64
	for i, c := range counts {
		if seen += c; seen >= want {
			// the bucket's upper bound (its lower one for the last, unbounded bucket)
			b := g.pauses.Buckets[i+1]
			if math.IsInf(b, 1) {
				b = g.pauses.Buckets[i]
			}
			d.pauseP99 = time.Duration(b * float64(time.Second))
			break
		}
	}
	return d
}

// set records d in r.
func (d gcDelta) set(r *Result) {
	r.GCCycles = &d.cycles
	p := int64(d.pauseP99)
	r.GCPauseP99 = &p
	r.GCCPUShare = f64(round(d.cpuShare, 4))
}
