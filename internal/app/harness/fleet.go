package harness

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// stopTimeout is how long a worker gets to finish its lock at the end.
const stopTimeout = 15 * time.Second

// slot is one place in the fleet of workers. A killed worker is replaced by
// a new incarnation in the same slot, behind the same proxies.
type slot struct {
	n       int
	proxies []*netproxy.Proxy // one per etcd member
	claimed atomic.Bool       // a nemesis is working on this slot

	mu    sync.Mutex
	proc  *childproc.Proc
	incar int

	waiting atomic.Bool   // a nemesis waits for this slot's next hold
	holds   chan struct{} // delivers that hold
}

// fleet runs the workers and routes their events.
type fleet struct {
	base  workerConfig
	slots []*slot
	hist  *history
}

func newFleet(base workerConfig, members []string, workers int, hist *history) (*fleet, error) {
	f := &fleet{base: base, hist: hist}
	for n := range workers {
		s := &slot{n: n, holds: make(chan struct{}, 1)}
		f.slots = append(f.slots, s)
		for _, m := range members {
			p, err := netproxy.Start(m)
			if err != nil {
				f.close()
				return nil, err
			}
			s.proxies = append(s.proxies, p)
		}
	}
	return f, nil
}

// start starts a new incarnation of slot s's worker.
func (f *fleet) start(s *slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := f.base
	cfg.ID = fmt.Sprintf("w%d.%d", s.n, s.incar)
	cfg.Seed = f.base.Seed*1000 + int64(s.n*100+s.incar)
	for _, p := range s.proxies {
		cfg.Etcd = append(cfg.Etcd, "http://"+p.Addr())
	}
	s.incar++
	p, err := startWorker(cfg, func(p *childproc.Proc, e check.Event) { f.onEvent(s, p, e) })
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// onEvent records e and hands a hold to the nemesis waiting for it; a hold
// nobody waits for (the nemesis gave up) is released at once.
func (f *fleet) onEvent(s *slot, p *childproc.Proc, e check.Event) {
	f.hist.add(e)
	if e.Ev != check.EvHold {
		return
	}
	if s.waiting.CompareAndSwap(true, false) {
		s.holds <- struct{}{}
		return
	}
	_ = p.Send(childproc.Go) // an error: it has exited
}

// id returns the ID of the slot's current worker.
func (s *slot) id() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("w%d.%d", s.n, s.incar-1)
}

func (s *slot) current() *childproc.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// claim picks a random slot no other nemesis is working on, or nil.
func (f *fleet) claim(rng *rand.Rand) *slot {
	for _, i := range rng.Perm(len(f.slots)) {
		if f.slots[i].claimed.CompareAndSwap(false, true) {
			return f.slots[i]
		}
	}
	return nil
}

func (s *slot) release() { s.claimed.Store(false) }

// stop stops every worker, letting each finish its current lock; one
// that does not within stopTimeout is killed.
func (f *fleet) stop() {
	var wg sync.WaitGroup
	for _, s := range f.slots {
		if p := s.current(); p != nil {
			wg.Go(func() { _ = p.Stop(stopTimeout) })
		}
	}
	wg.Wait()
}

func (f *fleet) close() {
	for _, s := range f.slots {
		for _, p := range s.proxies {
			_ = p.Close()
		}
	}
}
