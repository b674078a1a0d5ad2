package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/reqfault"
)

// Finding E7 (shared with locks; severity depends on the network): a term's
// key deleted by someone else while the watch stream delivers nothing (a
// stream that hangs while keepalives, on their own stream, go on) was never
// noticed: Run's lead kept running, its context never cancelled, while
// another Run led. Known and not fixed while each lock had a clientv3 watch
// of its own; fixed by the key watcher's probes (keywatch.go). Observe,
// which still watches through clientv3, keeps the blind spot: a hung watch
// stream makes it silently stale.
func TestBreakRunHungWatchNoticesDeletion(t *testing.T) {
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
	e, err := direct.Get(t.Context(), prefix(t)+"elect/hung/", clientv3WithPrefix()...)
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
