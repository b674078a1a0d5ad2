package etcdlock_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/oteltest"
)

// BenchmarkTelemetryOverhead alternates, in one loop on one server, an
// uncontended Lock+Unlock by a client on the global providers with no SDK
// installed (the default: instruments are no-ops) and by one with the
// OpenTelemetry SDK installed (metrics to a reader, every span sampled and
// recorded), and reports the ratio. Neither has a logger.
func BenchmarkTelemetryOverhead(b *testing.B) {
	compact(b)
	cli := etcdClient(b)
	otel := oteltest.New(b)
	plain := &fenced{c: newLocker(b, cli, etcdlock.WithTTL(10*time.Second)), name: "plain"}
	sdk := &fenced{c: newLocker(b, cli, etcdlock.WithTTL(10*time.Second),
		etcdlock.WithMeterProvider(otel.Meters), etcdlock.WithTracerProvider(otel.Tracers)), name: "sdk"}
	sideBySide(b, "nosdk", plain, "sdk", sdk)
}
