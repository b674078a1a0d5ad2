package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A term's key deleted by someone else while the watch stream delivers
// nothing (a stream that hangs while keepalives, on their own stream, go
// on) is noticed: Run's lead's context is cancelled before another Run
// leads. The key watcher's probes (keywatch.go) find the hung stream out,
// as Observe's progress requests do for Observe (TestObserveHungStream);
// while each lock had a clientv3 watch of its own, the deletion was never
// noticed (the same holds for locks; how bad it is depends on the network).
func TestRunHungWatchNoticesDeletion(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 207)
	a := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	b := newLocker(t, direct, etcdlock.WithTTL(3*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	aStarts := make(chan context.Context, 4)
	aDone := make(chan error, 1)
	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	go func() {
		aDone <- a.Run(ctx, "hung", "", func(tctx context.Context, term *etcdlock.Term) error {
			aStarts <- tctx
			<-tctx.Done()
			return nil
		})
	}()
	actx := nextTerm2(t, aStarts)
	time.Sleep(200 * time.Millisecond) // past the monitor's 50 ms delay: it watches
	e, err := direct.Get(t.Context(), keysOf(t).Election("hung"), clientv3WithPrefix()...)
	if err != nil || len(e.Kvs) != 1 {
		t.Fatalf("a's key: %v %v", e, err)
	}
	if _, err := direct.Delete(t.Context(), string(e.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer bcancel()
	tb, err := b.Campaign(bctx, "hung", "b")
	if err != nil {
		t.Fatalf("b's Campaign after a's key was deleted: %v", err)
	}
	defer tb.Resign(t.Context())
	select {
	case <-actx.Done():
	case <-time.After(3 * time.Second):
		in.HangStreams(nil)
		cancel()
		<-aDone
		t.Fatalf("b leads (token %d) and a's lead context is still open 3s after a's key was deleted (a's watch stream hung, keepalives fine)", tb.Token())
	}
	cancel()
	<-aDone
}

func clientv3WithPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }

// An observer whose watch stream hangs (and every new one with it) asks for
// progress every TTL/3, ends a watch that answered nothing by the next ask,
// and reads the queue: it reports the next leader within two thirds of the
// TTL or so, not never. (Before: Observe stayed silent on a hung stream.)
func TestObserveHungStream(t *testing.T) {
	testenv.Long(t, "a hung watch stream waited out (TestKeyWatchHungStream stays in the fast loop)")
	t.Parallel()
	fcli, in := faulty(t, 208)
	watcher := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	c := newLocker(t, etcdClient(t))
	first := mustCampaign(t, c, "hung-observe", "first")
	leaders, err := watcher.Observe(t.Context(), "hung-observe")
	if err != nil {
		t.Fatal(err)
	}
	if e := nextLeader(t, leaders); e.Data != "first" {
		t.Fatalf("Observe: got %q, want first", e.Data)
	}
	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	if err := first.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := mustCampaign(t, c, "hung-observe", "second")
	defer second.Resign(t.Context())
	start := time.Now()
	select {
	case e, ok := <-leaders:
		if !ok {
			t.Fatal("Observe: channel closed")
		}
		if e.Data != "second" || e.Token != second.Token() {
			t.Fatalf("Observe: got %q (token %d), want second (token %d)", e.Data, e.Token, second.Token())
		}
		t.Logf("next leader reported %v after its Campaign, on a hung stream (TTL 3s)", time.Since(start).Round(time.Millisecond))
	case <-time.After(4 * time.Second):
		t.Fatalf("Observe reported no new leader 4s after it was elected; hung streams: %d", in.Hung())
	}
}

// A waiter whose watch stream hangs while the connection works (keepalives
// and unary requests answered, every watch stream silent, the new ones
// too) still takes the lock soon after its predecessor unlocks: its watch
// is on the Client's probed stream, whose hang is found within two thirds
// of the TTL or so, and a waiter re-reads the queue when its stream ends.
// (Before: it waited until its context ended.)
func TestWaiterHungStreamTakesTheLock(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 209)
	holder := newLocker(t, direct, etcdlock.WithTTL(3*time.Second))
	waiter := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	h := mustLock(t, holder, "x")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(ctx, "x")
		if err == nil {
			err = l.Unlock(t.Context())
		}
		got <- err
	}()
	poll.Until(t, "the waiter queued", func() bool { return len(keys(t, direct, keysOf(t).Lock("x"))) == 2 })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	unlocked := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter's Lock: %v", err)
		}
		t.Logf("the waiter took the lock %v after its predecessor unlocked", time.Since(unlocked).Round(time.Millisecond))
	case <-time.After(8 * time.Second):
		t.Fatalf("the waiter is still waiting 8s after its predecessor unlocked (its watch stream hung, the connection fine; TTL 3s)")
	}
}
