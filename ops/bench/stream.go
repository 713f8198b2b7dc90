package bench

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/runtime"
)

const streamKey = "agent:main:bench:stream"

// stream_delta: one text chunk handed to a gateway's live output (what a
// runtime's emit calls with each chunk it receives from its model) until a
// subscriber on the bench client's connection holds it decoded. The
// gateway's connection is in-process (or TCP with --tcp) as serve runs it;
// the subscriber, as a console would, is over TCP.
func runStreamDelta(ctx context.Context, e *env) (Result, error) {
	gc, err := e.connectInternal("bench stream gateway")
	if err != nil {
		return Result{}, err
	}
	defer gc.Close()
	held := make(chan struct{}, 1)
	sub, err := e.nc.Subscribe(e.names.Live(bus.EncodeKey(streamKey)), func(m *nats.Msg) {
		var ev bus.LiveEvent
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == bus.LiveText && ev.Delta != "" {
			held <- struct{}{}
		}
	})
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		return Result{}, err
	}
	live := gateway.NewLiveOutput(gc, e.names, streamKey, "bench-stream-run", nil, nil)
	chunk := runtime.Event{Type: runtime.EventText, Delta: "a chunk of a streamed model reply, "}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	r, err := measure(ctx, e.sz.fast, func() error {
		live.Emit(chunk)
		timer.Reset(10 * time.Second)
		select {
		case <-held:
			timer.Stop()
			return nil
		case <-timer.C:
			return errors.New("the subscriber got no delta within 10s")
		}
	})
	r.Dataset = "35 B text delta as a ~100 B live message, 1 subscriber"
	return r, err
}
