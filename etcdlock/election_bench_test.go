package etcdlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencelock/fencelock/etcdlock"
)

// candidate is what the election benchmarks compare: one candidate of an
// election, with a session of its own.
type candidate interface {
	// campaign returns once the candidate leads, with its term's token
	// (its key's create revision).
	campaign(ctx context.Context) (int64, error)
	resign(ctx context.Context) error
}

type fencedCandidate struct {
	c     *etcdlock.Client
	value string
	t     *etcdlock.Term
}

func (f *fencedCandidate) campaign(ctx context.Context) (int64, error) {
	t, err := f.c.Campaign(ctx, "bench", f.value)
	if err != nil {
		return 0, err
	}
	f.t = t
	return int64(t.Token()), nil
}

func (f *fencedCandidate) resign(ctx context.Context) error { return f.t.Resign(ctx) }

type stockCandidate struct {
	e     *concurrency.Election
	value string
}

func (s stockCandidate) campaign(ctx context.Context) (int64, error) {
	if err := s.e.Campaign(ctx, s.value); err != nil {
		return 0, err
	}
	return s.e.Rev(), nil
}

func (s stockCandidate) resign(ctx context.Context) error { return s.e.Resign(ctx) }

// candidates returns n candidates of one election, each with its own
// session (stock Election keys a candidacy by its session's lease, so one
// session cannot campaign twice at once), for the implementation impl, and
// the key prefix they use (observeTokens takes it).
func candidates(b *testing.B, impl string, n int) ([]candidate, string) {
	b.Helper()
	cli := etcdClient(b)
	p := prefix(b)
	var cs []candidate
	for i := range n {
		value := fmt.Sprintf("candidate-%d", i)
		switch impl {
		case "etcdlock":
			c := newLocker(b, cli, etcdlock.WithTTL(10*time.Second), etcdlock.WithPrefix(p))
			cs = append(cs, &fencedCandidate{c: c, value: value})
		case "stock":
			cs = append(cs, stockCandidate{e: concurrency.NewElection(stockSession(b, cli), p+"bench"), value: value})
		}
	}
	return cs, p
}

func stockSession(b *testing.B, cli *clientv3.Client) *concurrency.Session {
	b.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// observeTokens watches the election of impl at p (as candidates set it up)
// from a client of its own and calls saw with the token of every leader it
// is sent, as soon as it is received. It stops when the benchmark ends.
func observeTokens(b *testing.B, impl, p string, saw func(int64)) {
	b.Helper()
	cli := etcdClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() {
		cancel()
		<-done
	})
	switch impl {
	case "etcdlock":
		ch, err := newLocker(b, cli, etcdlock.WithPrefix(p)).Observe(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer close(done)
			for e := range ch {
				saw(int64(e.Token))
			}
		}()
	case "stock":
		ch := concurrency.NewElection(stockSession(b, cli), p+"bench").Observe(ctx)
		go func() {
			defer close(done)
			for r := range ch {
				saw(r.Kvs[0].CreateRevision)
			}
		}()
	}
}

// BenchmarkElectionHandoff has 4 candidates, each with its own session, take
// turns leading one election. It reports terms per second and the handoff
// latency: from the moment the leader starts to resign to the moment the
// next leader's Campaign returns.
func BenchmarkElectionHandoff(b *testing.B) {
	for _, impl := range []string{"stock", "etcdlock"} {
		b.Run(impl, func(b *testing.B) {
			compact(b)
			cs, _ := candidates(b, impl, 4)
			benchHandoff(b, cs)
		})
	}
}

func benchHandoff(b *testing.B, cs []candidate) {
	ms := make([]mutex, len(cs))
	for i, c := range cs {
		ms[i] = candidateMutex{c}
	}
	benchTurns(b, ms, "terms/s")
}

// candidateMutex is a candidate as a mutex: Campaign locks, Resign unlocks.
type candidateMutex struct{ c candidate }

func (m candidateMutex) lock(ctx context.Context) error {
	_, err := m.c.campaign(ctx)
	return err
}

func (m candidateMutex) unlock(ctx context.Context) error { return m.c.resign(ctx) }

// BenchmarkObserveLatency has 4 candidates take turns leading one election
// while an observer, on a client of its own, watches it. It reports the
// time from the moment a leader's Resign returns (the next candidate leads
// once that deletion has landed) to the moment the observer receives the
// next leader; negative when the observer hears of it first. Each leader
// waits until the observer has received it before it resigns, so that
// every change finds the observer idle.
func BenchmarkObserveLatency(b *testing.B) {
	for _, impl := range []string{"stock", "etcdlock"} {
		b.Run(impl, func(b *testing.B) {
			compact(b)
			cs, p := candidates(b, impl, 4)
			seen := newSightings()
			observeTokens(b, impl, p, seen.saw)
			benchObserveHandoff(b, cs, seen)
		})
	}
}

// term is one term of an observed election: its token, and when its
// leader's Resign returned.
type term struct {
	token    int64
	resigned time.Time
}

func benchObserveHandoff(b *testing.B, cs []candidate, seen *sightings) {
	ctx := context.Background()
	var (
		left  atomic.Int64
		mu    sync.Mutex
		terms []term // in the order they began
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				tok, err := c.campaign(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				k := len(terms)
				terms = append(terms, term{token: tok})
				mu.Unlock()
				if err := seen.wait(tok); err != nil {
					b.Error(err)
				}
				err = c.resign(ctx)
				mu.Lock()
				terms[k].resigned = time.Now()
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	var lat []time.Duration
	for k := 1; k < len(terms); k++ {
		lat = append(lat, seen.at(terms[k].token).Sub(terms[k-1].resigned))
	}
	reportQuantiles(b, "observe", lat)
}

// BenchmarkObserveVacant has 4 candidates lead one election in turn with no
// one queued: each campaigns only after the previous leader has resigned,
// so every term begins in a vacant election. It reports the time from the
// moment the new leader's Campaign returns to the moment an observer
// receives it.
func BenchmarkObserveVacant(b *testing.B) {
	for _, impl := range []string{"stock", "etcdlock"} {
		b.Run(impl, func(b *testing.B) {
			compact(b)
			cs, p := candidates(b, impl, 4)
			seen := newSightings()
			observeTokens(b, impl, p, seen.saw)
			benchObserveVacant(b, cs, seen)
		})
	}
}

func benchObserveVacant(b *testing.B, cs []candidate, seen *sightings) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		c := cs[i%len(cs)]
		tok, err := c.campaign(ctx)
		if err != nil {
			b.Fatal(err)
		}
		led := time.Now()
		if err := seen.wait(tok); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, seen.at(tok).Sub(led))
		if err := c.resign(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportQuantiles(b, "observe", lat)
}

// sightings records when an observer received each leader.
type sightings struct {
	mu      sync.Mutex
	when    map[int64]time.Time
	changed chan struct{}
}

func newSightings() *sightings {
	return &sightings{when: map[int64]time.Time{}, changed: make(chan struct{}, 1)}
}

func (s *sightings) saw(token int64) {
	now := time.Now()
	s.mu.Lock()
	if _, ok := s.when[token]; !ok {
		s.when[token] = now
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *sightings) at(token int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.when[token]
}

// wait returns once token was received, or an error after 10 s. One
// goroutine waits at a time.
func (s *sightings) wait(token int64) error {
	deadline := time.After(10 * time.Second)
	for s.at(token).IsZero() {
		select {
		case <-s.changed:
		case <-deadline:
			return fmt.Errorf("observer never received the leader with token %d", token)
		}
	}
	return nil
}

// reportQuantiles reports the median and 99th percentile of ds, in ms, as
// name-p50-ms and name-p99-ms.
func reportQuantiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, name+"-p99-ms")
}
