package etcdlock_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// BenchmarkTelemetryOverhead alternates, in one loop on one server, an
// uncontended Lock+Unlock by a client on the global providers with no SDK
// installed (the default: instruments are no-ops) and by one with the
// OpenTelemetry SDK installed (metrics to a reader, every span sampled and
// recorded), and reports the ratio. Neither has a logger. The SDK keeps
// every span in memory in "kept" (as the tests read them: the heap grows
// with every span) and exports them through a batch processor in
// "exported" (as an application installs it; the exporter drops them).
func BenchmarkTelemetryOverhead(b *testing.B) {
	for _, tc := range []struct {
		name string
		sdk  func(testing.TB) *oteltest.SDK
	}{{"kept", oteltest.New}, {"exported", oteltest.NewExported}} {
		b.Run(tc.name, func(b *testing.B) {
			compact(b)
			cli := etcdClient(b)
			otel := tc.sdk(b)
			plain := &fenced{c: newLocker(b, cli, etcdlock.WithTTL(10*time.Second)), name: "plain"}
			sdk := &fenced{c: newLocker(b, cli, etcdlock.WithTTL(10*time.Second),
				etcdlock.WithMeterProvider(otel.Meters), etcdlock.WithTracerProvider(otel.Tracers)), name: "sdk"}
			sideBySide(b, "nosdk", plain, "sdk", sdk)
		})
	}
}
