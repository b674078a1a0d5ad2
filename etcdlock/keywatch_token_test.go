package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A Client that holds locks and does nothing else, on a member whose auth
// tokens outlive their last use by less than a third of the lease TTL,
// keeps its key-watch stream when a probe is refused for the stream's
// expired token: the watches already on the stream keep working past its
// token, and a refused probe was answered like any other, so the stream
// works. Ending the stream there would cost, every probe interval, a login
// (bcrypt on etcd's side), a read of every watched key and the creation of
// every watch again, forever. A lock's refused creation still ends the
// stream (the second lock here).
func TestKeyWatchProbeOnExpiredTokenKeepsStream(t *testing.T) {
	testenv.Long(t, "waits out an auth token's expiry (about 7 s)")
	t.Parallel()
	p := prefix(t)
	sec := secureEtcd(t, time.Second, false, p)
	root := sec.client(t, clientv3.Config{Username: "root", Password: rootPassword}, false)
	cli, in := sec.faultyLocker(t, 304)
	c := newLockerAt(t, cli, p, etcdlock.WithTTL(9*time.Second)) // probes every 3s
	held := mustLock(t, c, "held")
	poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	streams, txns := in.Calls("Watch/Watch"), in.Calls("KV/Txn")
	time.Sleep(7 * time.Second) // not synchronisation: two probes after the token expired
	if s, r := in.Calls("Watch/Watch")-streams, in.Calls("KV/Txn")-txns; s > 0 || r > 0 {
		t.Errorf("idle for 7s with one lock held: %d watch streams opened (each with a login), %d transactions; want none", s, r)
	}
	late := mustLock(t, c, "late") // its creation, refused for the token, moves the watches to a new stream
	poll.Until(t, "both watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 2 && ok })
	for _, l := range []*etcdlock.Lock{held, late} {
		if _, err := root.Delete(t.Context(), l.Key()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 3*time.Second, "Done of "+l.Name()+" after root deleted its key")
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("%s: Err: got %v, want ErrKeyDeleted", l.Name(), err)
		}
	}
}
