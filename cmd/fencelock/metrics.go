package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fencelock/fencelock/etcdlock"
)

// serveMetrics serves the client's metrics for Prometheus at addr
// (http://addr/metrics), through the OpenTelemetry Prometheus exporter, and
// returns the option that sends them there and a function that stops the
// server. It fails at once when addr cannot be listened on.
func serveMetrics(addr string) (etcdlock.Option, func(), error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	stop, err := serve(addr, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		mp.Shutdown(context.Background())
		return nil, nil, err
	}
	return etcdlock.WithMeterProvider(mp), func() {
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		mp.Shutdown(ctx)
	}, nil
}
