// Package etcdlock provides distributed locks on etcd whose holders carry a
// fencing token.
//
// A [Client] wraps the caller's *clientv3.Client. Its locks share one session
// (a lease the Client keeps alive); [Client.Lock] waits in a fair queue,
// [Client.TryLock] gives up at once with [ErrLocked]. A held [Lock] tells:
//
//   - [Lock.Token]: the create revision of the lock's key, unique to this
//     acquisition and strictly greater than every earlier holder's. Pass it to
//     the resource with a fence.Guard so the resource can refuse late writes.
//   - [Lock.Done] and [Lock.Err]: closed, with the reason, as soon as the lock
//     is lost or may be lost.
//   - [Lock.ValidUntil]: the instant, on the monotonic clock, up to which the
//     lease is known to be alive (send time of the last acknowledged
//     keepalive plus the granted TTL).
//
// Typical use:
//
//	locks, err := etcdlock.New(cli, etcdlock.WithTTL(15*time.Second))
//	if err != nil {
//		return err
//	}
//	defer locks.Close(context.Background())
//
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // never wait forever
//	defer cancel()
//	lock, err := locks.Lock(ctx, "billing-run")
//	if err != nil {
//		return err
//	}
//	defer lock.Unlock(context.Background())
//	guard, err := fence.NewGuard(lock)
//	...
//	err = guard.Put(ctx, store, "invoice/42", data) // refused by the store if a newer holder wrote
//
// # What a lock does and does not guarantee
//
// etcd grants the lock to one holder at a time. But a holder can be paused
// (GC, CPU starvation, VM migration, partition) for longer than its lease,
// and then act on a lock it no longer holds; Done closes when the process
// notices, which a paused process cannot do. Only the resource can refuse the
// late write, by comparing tokens: see package fence.
//
// Compared with go.etcd.io/etcd/client/v3/concurrency.Mutex, this package
// removes the key of a Lock whose context ends (also during the first
// request, and retrying in the background while etcd is unreachable), gives two acquisitions in one process sharing a session distinct
// keys and tokens, never deletes another holder's key on Unlock, tells the
// holder when its lease is lost, never hands the lock to a waiter whose
// session expired, and hands the lock over without etcd's 100 ms catch-up
// delay for watchers that start from an old revision.
package etcdlock
