package handlers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Stop releases everything the worker opened, its transcript reader
// included (its pooled reply subscriptions outlived Stop before), and a
// second Stop is harmless.
func TestWorkerStopClosesWhatItOpened(t *testing.T) {
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	s.Worker.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Transcripts.Count(ctx, "agent.main.main"); !errors.Is(err, transcripts.ErrClosed) {
		t.Fatalf("transcripts after Stop: %v, want ErrClosed", err)
	}
	if _, err := d.Runs.Watch("r1"); err == nil {
		t.Fatal("run watch after Stop: no error")
	}
	s.Worker.Stop()
}
