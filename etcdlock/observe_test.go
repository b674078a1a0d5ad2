package etcdlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// observed collects what an Observe channel sends and checks its order as
// it goes: tokens never go down, and a repeated token comes with a newer
// revision (a proclaimed value).
type observed struct {
	mu      sync.Mutex
	seen    map[fence.Token]bool
	last    etcdlock.Entry
	regress []string
	changed chan struct{}
}

func observe(t *testing.T, ctx context.Context, c *etcdlock.Client, name string) *observed {
	t.Helper()
	ch, err := c.Observe(ctx, name)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	o := &observed{seen: map[fence.Token]bool{}, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for e := range ch {
			o.add(e)
		}
	}()
	return o
}

func (o *observed) add(e etcdlock.Entry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.Token < o.last.Token || e.Token == o.last.Token && e.Rev <= o.last.Rev {
		o.regress = append(o.regress, fmt.Sprintf("token %d rev %d after token %d rev %d", e.Token, e.Rev, o.last.Token, o.last.Rev))
	}
	o.last = e
	o.seen[e.Token] = true
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// waitSeen waits until every token in want was sent.
func (o *observed) waitSeen(t *testing.T, want []fence.Token, what string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		o.mu.Lock()
		var missing []fence.Token
		for _, tok := range want {
			if !o.seen[tok] {
				missing = append(missing, tok)
			}
		}
		o.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("%s: %d of %d terms never observed, e.g. %v", what, len(missing), len(want), missing[:min(5, len(missing))])
		}
	}
}

func (o *observed) check(t *testing.T, what string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.regress) > 0 {
		t.Fatalf("%s: %d regressions, e.g. %s", what, len(o.regress), o.regress[0])
	}
}

// 4 candidates × 100 terms, with proclaims and cancelled campaigns in
// between: two observers see every term, in increasing token order.
func TestObserveEveryTermInOrder(t *testing.T) {
	t.Parallel()
	const candidates, terms = 4, 100
	cli := etcdClient(t)
	// Observe skips the terms of a gap in its watch, and a stream judged
	// hung makes one: it is probed every third of the TTL (500 ms at
	// least), and with a 1 s TTL two probes can pass with nothing heard
	// on a loaded machine. With 5 s, a probe goes every 1.7 s.
	watcher := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := []*observed{observe(t, ctx, watcher, "churn"), observe(t, ctx, newLocker(t, etcdClient(t), etcdlock.WithTTL(5*time.Second)), "churn")}
	// Observe promises every term from its first send on: a leader that
	// both have sent shows both watches established before the churn.
	ready := mustCampaign(t, watcher, "churn", "ready")
	for i, o := range obs {
		o.waitSeen(t, []fence.Token{ready.Token()}, fmt.Sprintf("observer %d: first leader", i))
	}
	if err := ready.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var tokens []fence.Token
	var wg sync.WaitGroup
	for i := range candidates {
		c := newLocker(t, etcdClient(t), etcdlock.WithTTL(5*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for n := 0; n < terms; {
				if rng.IntN(5) == 0 { // a campaign given up while waiting
					cctx, ccancel := context.WithTimeout(ctx, time.Duration(rng.IntN(3))*time.Millisecond)
					if term, err := c.Campaign(cctx, "churn", "quitter"); err == nil {
						term.Resign(ctx) // it won before giving up: it counts
						mu.Lock()
						tokens = append(tokens, term.Token())
						mu.Unlock()
						n++
					}
					ccancel()
					continue
				}
				term, err := c.Campaign(ctx, "churn", fmt.Sprintf("c%d-%d", i, n))
				if err != nil {
					t.Errorf("candidate %d: %v", i, err)
					return
				}
				if rng.IntN(3) == 0 {
					if err := term.Proclaim(ctx, fmt.Sprintf("c%d-%d-again", i, n)); err != nil {
						t.Errorf("Proclaim: %v", err)
					}
				}
				if err := term.Resign(ctx); err != nil {
					t.Errorf("Resign: %v", err)
				}
				mu.Lock()
				tokens = append(tokens, term.Token())
				mu.Unlock()
				n++
			}
		}()
	}
	wg.Wait()
	if len(tokens) != candidates*terms {
		t.Fatalf("terms: got %d, want %d", len(tokens), candidates*terms)
	}
	for i, o := range obs {
		o.waitSeen(t, tokens, fmt.Sprintf("observer %d", i))
		o.check(t, fmt.Sprintf("observer %d", i))
	}
}

// An observer cut off from etcd while leaders come and go, and the history
// is compacted, resumes with the current leader and never goes back.
func TestObserveResumesAfterCutAndCompaction(t *testing.T) {
	cli := etcdClient(t)
	pcli, proxy := proxied(t)
	watcher := newLocker(t, pcli)
	c := newLocker(t, cli)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := observe(t, ctx, watcher, "cut")

	first := mustCampaign(t, c, "cut", "1")
	o.waitSeen(t, []fence.Token{first.Token()}, "first leader")
	proxy.Cut()
	proxy.Reset() // the watch stream breaks; clientv3 resumes it from its last revision
	first.Resign(t.Context())
	for range 5 {
		term := mustCampaign(t, c, "cut", "between")
		term.Resign(t.Context())
	}
	last := mustCampaign(t, c, "cut", "last")
	defer last.Resign(t.Context())
	resp, err := cli.Get(t.Context(), "compact")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	o.waitSeen(t, []fence.Token{last.Token()}, "leader after the cut")
	o.check(t, "observer")
}

func TestObserveEndsOnClose(t *testing.T) {
	c, err := etcdlock.New(etcdClient(t), etcdlock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Observe(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	c.Close(t.Context())
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("Observe sent a leader of an empty election")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe channel still open 5s after Close")
	}
	if _, err := c.Observe(context.Background(), "x"); err == nil {
		t.Fatal("Observe after Close: got nil error, want ErrClosed")
	}
}
