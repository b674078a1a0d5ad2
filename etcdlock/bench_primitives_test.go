package etcdlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/fencelock/fencelock/etcdlock"
)

// A mutex of each kind: a semaphore's permit, a reader's or a writer's
// hold of a read/write lock, and etcd's own recipe's.
type (
	permitMutex struct {
		sm *etcdlock.Semaphore
		l  *etcdlock.Lock
	}
	rwMutex struct {
		c    *etcdlock.Client
		read bool
		l    *etcdlock.Lock
	}
	recipeMutex struct {
		m    *recipe.RWMutex
		read bool
	}
)

func (m *permitMutex) lock(ctx context.Context) (err error) { m.l, err = m.sm.Acquire(ctx); return err }
func (m *permitMutex) unlock(ctx context.Context) error     { return m.l.Unlock(ctx) }

func (m *rwMutex) lock(ctx context.Context) (err error) {
	if m.read {
		m.l, err = m.c.RLock(ctx, "bench")
	} else {
		m.l, err = m.c.Lock(ctx, "bench")
	}
	return err
}
func (m *rwMutex) unlock(ctx context.Context) error { return m.l.Unlock(ctx) }

func (m *recipeMutex) lock(context.Context) error {
	if m.read {
		return m.m.RLock()
	}
	return m.m.Lock()
}
func (m *recipeMutex) unlock(context.Context) error {
	if m.read {
		return m.m.RUnlock()
	}
	return m.m.Unlock()
}

// kindContenders returns n contenders of kind on one name, each with its
// own session: "lock", "semaphore" (one permit, so that each acquisition
// is a handoff), "rw" (alternately writers and readers), "readers",
// "writers" (of a read/write lock), "recipe-readers", "recipe-writers"
// (etcd's recipes.RWMutex).
func kindContenders(b *testing.B, kind string, n int) []mutex {
	b.Helper()
	cli := etcdClient(b)
	p := prefix(b)
	var ms []mutex
	for i := range n {
		c := func() *etcdlock.Client {
			return newLocker(b, cli, etcdlock.WithTTL(10*time.Second), etcdlock.WithPrefix(p))
		}
		switch kind {
		case "lock":
			ms = append(ms, &fenced{c: c(), name: "bench"})
		case "semaphore":
			sm, err := c().Semaphore("bench", 1)
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, &permitMutex{sm: sm})
		case "rw", "readers", "writers":
			ms = append(ms, &rwMutex{c: c(), read: kind == "readers" || kind == "rw" && i%2 == 1})
		case "recipe-readers", "recipe-writers":
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			ms = append(ms, &recipeMutex{m: recipe.NewRWMutex(s, p+"recipe"), read: kind == "recipe-readers"})
		}
	}
	return ms
}

// BenchmarkHandoffKinds has 8 contenders of each kind take turns on one
// name, one kind after the other on the same server, and reports each
// one's handoff latency (see benchTurns): a semaphore's and a read/write
// lock's against a Lock's. Run with -count to see the spread.
func BenchmarkHandoffKinds(b *testing.B) {
	for _, kind := range []string{"lock", "semaphore", "rw"} {
		b.Run(kind, func(b *testing.B) {
			compact(b)
			benchTurns(b, kindContenders(b, kind, 8), "acq/s")
		})
	}
}

// BenchmarkReaders has 8 contenders hold a read/write lock for 2 ms of work
// each time, as readers and as writers, with etcdlock and with etcd's
// recipes.RWMutex, and reports holds per second: readers work side by
// side, writers one at a time.
func BenchmarkReaders(b *testing.B) {
	for _, kind := range []string{"writers", "readers", "recipe-writers", "recipe-readers"} {
		b.Run(kind, func(b *testing.B) {
			compact(b)
			benchHolds(b, kindContenders(b, kind, 8), 2*time.Millisecond)
		})
	}
}

// benchHolds has ms take and release the lock, holding it for work each
// time, until b.N holds in all, and reports holds per second.
func benchHolds(b *testing.B, ms []mutex, work time.Duration) {
	ctx := context.Background()
	var left atomic.Int64
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
				time.Sleep(work) // the work done under the lock
				if err := m.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "holds/s")
}
