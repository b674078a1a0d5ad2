package etcdlocktest

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// Partition stalls cli's traffic, both ways, until [Server.Heal]: its
// connections stay open and nothing is delivered, as in a network partition
// or a hung load balancer. Other clients are not affected. cli must come
// from this Server's [Server.Client] or [Server.NewClient]. A client from
// [Server.Client] is healed when its test ends, before the test's cleanups
// run, so that closing an etcdlock.Client on it in a cleanup does not wait
// out its timeout; one from NewClient stays cut off until Heal.
//
// What a lock holder using cli sees: its keepalives go unanswered, so
// [etcdlock.Lock.Done] closes at the lock's validity deadline
// ([etcdlock.Lock.ValidUntil], at most the lease TTL after the partition
// began; later only by scheduling delays) with an error matching
// [etcdlock.ErrValidityExpired]. etcd expires
// the lease a little later, the TTL after the last keepalive it received;
// from then on another client can take the lock.
func (s *Server) Partition(cli *clientv3.Client) {
	for _, p := range s.proxiesOf(cli, "Partition") {
		p.Cut()
	}
}

// Heal ends cli's partition: what was sent meanwhile is delivered, as TCP
// would retransmit it. A lock lost during the partition stays lost; the
// holder's etcdlock.Client grants a new lease on its next Lock.
func (s *Server) Heal(cli *clientv3.Client) { healAll(s.proxiesOf(cli, "Heal")) }

// ExpireLease ends lease id now (a revoke), as etcd does when a lease
// expires: every key attached to it is deleted at once, so another client
// can take the lock immediately. Pass [etcdlock.Lock.Lease]; every lock of
// the same etcdlock.Client shares that lease and is lost with it. ctx
// bounds the request.
//
// What the holder sees: Done closes within about 150 ms (its watch of the
// lock's key reports the deletion, and the lease is found gone), or at its
// next keepalive (every third of the TTL), whichever is first, with an
// error matching [etcdlock.ErrLeaseExpired].
func (s *Server) ExpireLease(ctx context.Context, id clientv3.LeaseID) error {
	if _, err := s.admin.Revoke(ctx, id); err != nil {
		return fmt.Errorf("etcdlocktest: revoke lease %x: %w", int64(id), err)
	}
	return nil
}

// DeleteKey deletes the key of lock, as an operator breaking a stuck lock
// would; the lease lives on. It deletes the key only while it is this
// acquisition's (its create revision is lock's token), and fails if it is
// already gone. ctx bounds the request.
//
// What the holder sees: Done closes within about 150 ms, with an error
// matching [etcdlock.ErrKeyDeleted]. Other locks of the same
// etcdlock.Client are not affected. The next waiter gets the lock at once.
func (s *Server) DeleteKey(ctx context.Context, lock *etcdlock.Lock) error {
	key := lock.Key()
	resp, err := s.admin.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(lock.Token()))).
		Then(clientv3.OpDelete(key)).
		Commit()
	switch {
	case err != nil:
		return fmt.Errorf("etcdlocktest: delete %q: %w", key, err)
	case !resp.Succeeded:
		return fmt.Errorf("etcdlocktest: delete %q: the key of token %d is gone", key, lock.Token())
	}
	return nil
}
