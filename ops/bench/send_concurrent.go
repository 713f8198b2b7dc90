package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// send_concurrent: send_throughput_2gw's load, 32 senders each
// waiting for its reply against 2 gateways (script echo, delivery skipped),
// and what it costs the store: writes_per_send is, per stream (a KV
// bucket's is KV_<bucket>), the messages it stored over the whole run
// (its last sequence moved) divided by the sends made, warm-up included.
// Consumer acks are not stream messages and are not counted.
func runSendConcurrent(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSendTargets(ctx, sendSenders); err != nil {
		return Result{}, err
	}
	before, err := e.lastSeqs(ctx)
	if err != nil {
		return Result{}, err
	}
	r, err := e.runSendThroughput(ctx, "send_concurrent", 2, 0)
	if err != nil {
		return r, err
	}
	after, err := e.lastSeqs(ctx)
	if err != nil {
		return Result{}, err
	}
	p := e.sz.sendTput
	sends := 1 + max(p.warm/sendSenders, 1)*sendSenders + max(p.ops/sendSenders, 1)*sendSenders // checkFirstSend, warm-up, timed
	per, total := writesPer(before, after, sends)
	r.WritesPerSend = per
	r.Dataset += fmt.Sprintf("; %.2f stream writes per send (%s)", total, writesLine(per))
	return r, nil
}

// writesPer is, per stream, the messages stored between the last sequences
// before and after, divided by n (rounded), leaving out streams that stored
// none; total is their sum.
func writesPer(before, after map[string]uint64, n int) (per map[string]float64, total float64) {
	per = map[string]float64{}
	for name, seq := range after {
		if d := seq - before[name]; d > 0 {
			w := round(float64(d)/float64(n), 2)
			per[name], total = w, total+w
		}
	}
	return per, total
}

// lastSeqs is the last sequence of every stream but the bench's own.
func (e *env) lastSeqs(ctx context.Context) (map[string]uint64, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	var ours []string
	names := e.js.StreamNames(cctx)
	for name := range names.Name() {
		if !strings.HasPrefix(name, "BENCH_") && !strings.HasPrefix(name, "KV_bench_") {
			ours = append(ours, name)
		}
	}
	if err := names.Err(); err != nil && err != jetstream.ErrEndOfData {
		return nil, err
	}
	return streamLastSeqs(cctx, e.js, ours)
}

// streamLastSeqs is the last sequence of each named stream.
func streamLastSeqs(ctx context.Context, js jetstream.JetStream, names []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(names))
	for _, name := range names {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = st.CachedInfo().State.LastSeq
	}
	return out, nil
}

func writesLine(per map[string]float64) string {
	names := make([]string, 0, len(per))
	for n := range per {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, per[n])
	}
	return strings.Join(parts, ", ")
}
