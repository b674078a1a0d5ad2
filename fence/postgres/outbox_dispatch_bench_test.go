package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// benchHolder holds its token for the whole benchmark.
type benchHolder struct{ token fence.Token }

func (h benchHolder) Token() fence.Token    { return h.token }
func (h benchHolder) Done() <-chan struct{} { return nil }

// dispatchRig is an Outbox on a fresh database, an HTTP receiver on
// loopback that counts the requests and passes each one's arrival time
// to arrived (when not nil), and a running Dispatcher between them.
type dispatchRig struct {
	ob       *postgres.Outbox
	pool     *pgxpool.Pool
	url      string
	received atomic.Int64
	arrived  chan time.Time
}

func newDispatchRig(b *testing.B, arrivals bool, opts ...outbox.Option) *dispatchRig {
	b.Helper()
	pool := pgtest.NewPool(b)
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := ob.CreateTable(b.Context()); err != nil {
		b.Fatal(err)
	}
	r := &dispatchRig{ob: ob, pool: pool}
	if arrivals {
		r.arrived = make(chan time.Time, 1)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.received.Add(1)
		if r.arrived != nil {
			r.arrived <- time.Now()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	r.url = srv.URL + "/effects"
	sender, err := outbox.NewHTTPSender()
	if err != nil {
		b.Fatal(err)
	}
	d, err := outbox.NewDispatcher(ob, sender, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, benchHolder{1}, outbox.All) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			b.Errorf("Dispatcher.Run: got error %v, want context.Canceled", err)
		}
	})
	return r
}

// settled waits until no effect is pending.
func (r *dispatchRig) settled(b *testing.B) {
	b.Helper()
	poll.Until(b, "every effect settled", func() bool {
		es, err := r.ob.Pending(b.Context(), outbox.All, nil, 1)
		if err != nil {
			b.Fatal(err)
		}
		return len(es) == 0
	})
}

// BenchmarkOutboxDispatch: one dispatcher delivering to an HTTP receiver
// on loopback, at its defaults: N effects on 64 resources are recorded in
// one fenced transaction (RunInTxAll), and the time from its commit until
// every one is settled gives effects/s. Goal: >= 1,000 effects/s.
func BenchmarkOutboxDispatch(b *testing.B) {
	const n, resources = 2000, 64
	r := newDispatchRig(b, false)
	ctx := b.Context()
	claims := make([]fence.Claim, resources)
	for i := range claims {
		claims[i] = fence.Claim{Resource: fmt.Sprintf("acct-%d", i), Token: 1}
	}
	payload := make([]byte, 200)
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		effects := make([]outbox.Effect, n)
		for j := range effects {
			effects[j] = outbox.Effect{Resource: claims[j%resources].Resource, Token: 1, Seq: int64(i*n + j),
				Destination: r.url, Payload: payload}
		}
		err := postgres.RunInTxAll(ctx, r.pool, claims, func(tx pgx.Tx) error { return r.ob.Record(ctx, tx, effects...) })
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		want := int64((i + 1) * n)
		poll.Until(b, "every effect received", func() bool { return r.received.Load() >= want })
		r.settled(b)
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "effects/s")
}

// BenchmarkOutboxLatency: the time from a fenced transaction's commit
// (RunInTx returning) to the HTTP receiver getting its one effect, with
// the dispatcher idle before each (every effect settled), woken by
// LISTEN/NOTIFY: its poll interval is an hour. Goal: p99 <= 50 ms.
func BenchmarkOutboxLatency(b *testing.B) {
	const samples = 200
	r := newDispatchRig(b, true, outbox.WithPollInterval(time.Hour))
	ctx := b.Context()
	var lat []time.Duration
	seq := int64(0)
	for b.Loop() {
		for range samples {
			seq++
			e := outbox.Effect{Resource: "acct", Token: 1, Seq: seq, Destination: r.url, Payload: []byte("receipt")}
			err := postgres.RunInTx(ctx, r.pool, "acct", 1, func(tx pgx.Tx) error { return r.ob.Record(ctx, tx, e) })
			committed := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			select {
			case at := <-r.arrived:
				lat = append(lat, max(0, at.Sub(committed)))
			case <-time.After(poll.Timeout):
				b.Fatalf("effect %d not received after %v (the dispatcher polls hourly: was it woken?)", seq, poll.Timeout)
			}
			r.settled(b)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
