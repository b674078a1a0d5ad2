//go:build scale

package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencelock/fencelock/etcdlock"
)

// lossSlack is how long after its validity deadline a lock's Done may close
// when the session is lost.
const lossSlack = 100 * time.Millisecond

// TestScaleSessionLoss cuts off a client holding scaleLocks locks on one
// session and checks that every lock's Done closes within lossSlack of its
// ValidUntil, and that etcd deletes the keys no earlier. Stock Mutex has no
// per-lock Done or validity deadline; its subtest logs when the session's
// Done closed against when etcd deleted the keys.
func TestScaleSessionLoss(t *testing.T) {
	ep := scaleMember(t)
	t.Run("etcdlock", func(t *testing.T) { lossFenced(t, ep, "/scale/loss/") })
	t.Run("nowatch", func(t *testing.T) { lossFenced(t, ep, "/scale/loss-nowatch/", etcdlock.WithoutKeyWatch()) })
	t.Run("stock", func(t *testing.T) { lossStock(t, ep) })
}

func lossFenced(t *testing.T, ep, p string, opts ...etcdlock.LockOption) {
	cli, px := proxiedTo(t, ep)
	c, err := etcdlock.New(cli, etcdlock.WithTTL(scaleTTL*time.Second), etcdlock.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	defer px.Heal()
	locks := make([]*etcdlock.Lock, scaleLocks)
	inParallel(t, func(ctx context.Context, i int) (err error) {
		locks[i], err = c.Lock(ctx, scaleName(i), opts...)
		return err
	})
	if t.Failed() {
		t.FailNow()
	}
	settleWatchers(t, ep) // every monitor watches its key
	closed := make([]time.Time, scaleLocks)
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Go(func() {
			<-l.Done()
			closed[i] = time.Now()
		})
	}
	deleted := watchDeletions(t, etcdClient(t, ep), etcdlock.KeysUnder(p).Locks())
	cut := time.Now()
	px.Cut()
	waitGroup(t, &wg, 2*scaleTTL*time.Second+time.Minute)
	first, last := deleted()
	valid := locks[0].ValidUntil()
	var late []time.Duration
	causes := map[string]int{}
	for i, l := range locks {
		late = append(late, closed[i].Sub(l.ValidUntil()))
		if !l.ValidUntil().Equal(valid) {
			t.Errorf("lock %d: ValidUntil %v, lock 0's %v: want one session's deadline", i, l.ValidUntil(), valid)
		}
		causes[lossCause(l.Err())]++
	}
	t.Logf("cut %v before ValidUntil; Done − ValidUntil over %d locks: %s; causes %v",
		valid.Sub(cut).Round(time.Millisecond), scaleLocks, spread(late), causes)
	t.Logf("etcd deleted the keys from ValidUntil%+v to ValidUntil%+v",
		first.Sub(valid).Round(time.Millisecond), last.Sub(valid).Round(time.Millisecond))
	if m := slices.Max(late); m > lossSlack {
		t.Errorf("Done closed up to %v after ValidUntil, want at most %v", m, lossSlack)
	}
	if first.Before(valid) {
		t.Errorf("etcd deleted a key %v before ValidUntil, want none before", valid.Sub(first))
	}
}

func lossStock(t *testing.T, ep string) {
	cli, px := proxiedTo(t, ep)
	p := "/scale/loss-stock/"
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(scaleTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer px.Heal()
	inParallel(t, func(ctx context.Context, i int) error {
		return concurrency.NewMutex(s, p+scaleName(i)).Lock(ctx)
	})
	if t.Failed() {
		t.FailNow()
	}
	deleted := watchDeletions(t, etcdClient(t, ep), p)
	cut := time.Now()
	px.Cut()
	done := waitClosed(t, s.Done(), 2*scaleTTL*time.Second+time.Minute, "session Done")
	first, last := deleted()
	t.Logf("after the cut: session Done closed at %v, etcd deleted the keys from %v to %v; Done − first deletion %v",
		done.Sub(cut).Round(time.Millisecond), first.Sub(cut).Round(time.Millisecond),
		last.Sub(cut).Round(time.Millisecond), done.Sub(first).Round(time.Millisecond))
}

// watchDeletions watches the keys under p and returns a function that waits
// until scaleLocks of them are deleted and returns when the first and the
// last deletion arrived.
func watchDeletions(t *testing.T, cli *clientv3.Client, p string) func() (first, last time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wch := cli.Watch(ctx, p, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		t.Fatalf("watch %q: got %+v, want created", p, wr)
	}
	var first, last time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for wr := range wch {
			if len(wr.Events) > 0 && n == 0 {
				first = time.Now()
			}
			if n += len(wr.Events); n >= scaleLocks {
				last = time.Now()
				return
			}
		}
	}()
	return func() (time.Time, time.Time) {
		waitClosed(t, done, 2*scaleTTL*time.Second+time.Minute, "deletions")
		return first, last
	}
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitClosed(t, done, d, "every lock's Done")
}

// lossCause names a lost lock's cause.
func lossCause(err error) string {
	for _, e := range []error{etcdlock.ErrValidityExpired, etcdlock.ErrLeaseExpired, etcdlock.ErrKeyDeleted} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return fmt.Sprint(err)
}

// spread is the minimum, median, 99th percentile and maximum of ds.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("min %v, p50 %v, p99 %v, max %v", r(s[0]), r(s[len(s)/2]), r(s[len(s)*99/100]), r(s[len(s)-1]))
}
