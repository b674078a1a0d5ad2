package etcdfence_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence/outbox"
)

// TestOutboxWatchLeavesNoGoroutine: once a watch's context ends and its
// channel closed, the goroutines Watch started (its own and the client's
// watch stream) are gone. The control: while the watch runs, the same
// check finds them.
func TestOutboxWatchLeavesNoGoroutine(t *testing.T) {
	_, o := newOutbox(t)
	if _, err := o.Pending(t.Context(), outbox.All, nil, 1); err != nil { // the client's connection is up
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := o.Watch(ctx, outbox.All)
	if err != nil {
		t.Fatalf("Watch: got %v, want nil", err)
	}
	if err := goleak.Find(before); err == nil {
		t.Fatal("control: no goroutine found while the watch runs")
	}
	cancel()
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-deadline:
			t.Fatal("Watch: channel not closed within 5 s of its context's end")
		}
	}
	goleak.VerifyNone(t, before)
}
