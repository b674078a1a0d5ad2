package etcdlock_test

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// A Client made before the application installs its SDK as the global
// tracer provider (the default providers) starts tracing with the next
// Lock once it does: with no SDK set, etcdlock starts no span at all.
// (It leaves a no-op global provider behind: the global one cannot be
// unset.)
func TestTelemetryGlobalSDKSetLater(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	before := mustLock(t, c, "global-before")
	if err := before.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	sdk := oteltest.New(t)
	otel.SetTracerProvider(sdk.Tracers)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	after := mustLock(t, c, "global-after")
	if err := after.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcdlock.Lock", "etcdlock.Unlock"} {
		if n := len(sdk.Spans(t, name)); n != 1 {
			t.Errorf("%d %s spans after the SDK was set, want 1 (the second lock's)", n, name)
		}
	}
}
