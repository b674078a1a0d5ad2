package etcdlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencelock/fencelock/etcdlock"
)

// mutex is what the benchmarks compare: one contender's lock.
type mutex interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type fenced struct {
	c    *etcdlock.Client
	name string
	l    *etcdlock.Lock
}

func (m *fenced) lock(ctx context.Context) (err error) {
	m.l, err = m.c.Lock(ctx, m.name)
	return err
}
func (m *fenced) unlock(ctx context.Context) error { return m.l.Unlock(ctx) }

type stock struct{ m *concurrency.Mutex }

func (m stock) lock(ctx context.Context) error   { return m.m.Lock(ctx) }
func (m stock) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }

// contenders returns n mutexes on one name, each with its own session, for
// the implementation named impl.
func contenders(b *testing.B, impl string, n int) []mutex {
	b.Helper()
	cli := etcdClient(b)
	p := prefix(b)
	var ms []mutex
	for range n {
		switch impl {
		case "etcdlock":
			ms = append(ms, &fenced{c: newLocker(b, cli, etcdlock.WithTTL(10*time.Second), etcdlock.WithPrefix(p)), name: "bench"})
		case "stock":
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			ms = append(ms, stock{concurrency.NewMutex(s, p+"bench")})
		}
	}
	return ms
}

// BenchmarkUncontended is one client taking and releasing a free lock.
func BenchmarkUncontended(b *testing.B) {
	for _, impl := range []string{"stock", "etcdlock"} {
		b.Run(impl, func(b *testing.B) {
			compact(b)
			m := contenders(b, impl, 1)[0]
			for b.Loop() {
				lockUnlock(b, m)
			}
		})
	}
}

// BenchmarkUncontendedSideBySide alternates stock Mutex and etcdlock in one
// loop (rotating which goes first) on the same server, so that load from
// elsewhere on a shared machine falls on both alike, and reports the ratio.
func BenchmarkUncontendedSideBySide(b *testing.B) {
	compact(b)
	sideBySide(b, "stock", contenders(b, "stock", 1)[0], "etcdlock", contenders(b, "etcdlock", 1)[0])
}

// sideBySide alternates Lock+Unlock of base and other in one loop (rotating
// which goes first) and reports each one's µs per op and other ÷ base.
func sideBySide(b *testing.B, baseName string, base mutex, otherName string, other mutex) {
	var tBase, tOther time.Duration
	i := 0
	for b.Loop() {
		first, second, t1, t2 := base, other, &tBase, &tOther
		if i%2 == 1 {
			first, second, t1, t2 = other, base, &tOther, &tBase
		}
		*t1 += timed(b, first)
		*t2 += timed(b, second)
		i++
	}
	n := float64(b.N)
	b.ReportMetric(float64(tBase.Microseconds())/n, baseName+"-µs/op")
	b.ReportMetric(float64(tOther.Microseconds())/n, otherName+"-µs/op")
	b.ReportMetric(float64(tOther)/float64(tBase), "ratio")
}

func timed(b *testing.B, m mutex) time.Duration {
	start := time.Now()
	lockUnlock(b, m)
	return time.Since(start)
}

func lockUnlock(b *testing.B, m mutex) {
	ctx := context.Background()
	if err := m.lock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := m.unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkContended has 8 contenders, each with its own session, take turns
// on one lock. It reports acquisitions per second and the handoff latency:
// from the moment a holder starts to unlock to the moment the next holder's
// Lock returns.
func BenchmarkContended(b *testing.B) {
	for _, impl := range []string{"stock", "etcdlock"} {
		b.Run(impl, func(b *testing.B) {
			compact(b)
			benchContended(b, contenders(b, impl, 8))
		})
	}
}

func benchContended(b *testing.B, ms []mutex) { benchTurns(b, ms, "acq/s") }

// benchTurns has ms take turns until b.N acquisitions in all, and reports
// them per second (as unit) and the handoff latency: from the moment a
// holder starts to release to the moment the next holder's acquisition
// returns; and the release's own (Unlock's), so that the rest, the
// waiter's part from the release to its acquisition, can be told apart.
func benchTurns(b *testing.B, ms []mutex, unit string) {
	ctx := context.Background()
	var (
		left     atomic.Int64
		released atomic.Int64 // unix nanos of the last unlock start; 0 = none
		mu       sync.Mutex
		handoffs []time.Duration
		releases []time.Duration // each Unlock's, the first part of a handoff
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := m.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if r := released.Swap(0); r != 0 {
					d := time.Since(time.Unix(0, r))
					mu.Lock()
					handoffs = append(handoffs, d)
					mu.Unlock()
				}
				r := time.Now()
				released.Store(r.UnixNano())
				if err := m.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				releases = append(releases, time.Since(r))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	reportQuantiles(b, "handoff", handoffs)
	reportQuantiles(b, "release", releases)
}

// compact discards the history earlier benchmarks left, so that each
// starts from the same state.
func compact(b *testing.B) {
	cli := etcdClient(b)
	resp, err := cli.Get(context.Background(), "compact")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cli.Compact(context.Background(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		b.Fatal(err)
	}
}
