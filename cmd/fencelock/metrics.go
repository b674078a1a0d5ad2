package main

import (
	"context"
	"net"
	"net/http"
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		mp.Shutdown(context.Background())
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // ErrServerClosed at Shutdown; any other error leaves /metrics unserved, which a scrape shows
	}()
	return etcdlock.WithMeterProvider(mp), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		mp.Shutdown(ctx)
	}, nil
}
