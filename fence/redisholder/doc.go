// Package redisholder fences writes with a lock of github.com/bsm/redislock:
// a [Lock] is a redislock lock with a fencing token, a [fence.Holder] for a
// [fence.Guard].
//
// redislock v0.9.4, the latest version the Go module proxy lists, hands
// out no fencing token (its Lock.Token is a random string, which cannot
// be ordered; the FenceToken of its pull request #94 is in no tagged
// version yet). So the token comes from a counter in Redis, beside the lock's
// key ([TokenKey]), incremented by a script that first checks that the
// lock's key still holds this lock's value: a token is issued only while
// the lock is held, so the holders' tokens grow in the order they held the
// lock, and a client whose lock ran out gets [ErrNotHeld] and no token.
//
//	l, err := redisholder.Obtain(ctx, rdb, "invoice-42", 30*time.Second, nil)
//	if err != nil {
//		return err // redislock.ErrNotObtained: someone else holds it
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	g, err := fence.NewGuard(l)
//	if err != nil {
//		return err
//	}
//	err = g.Put(ctx, store, "invoice-42", data) // fence.ErrStale if a newer holder wrote
//
// [New] does the same for a lock already obtained with redislock.Obtain.
//
// # Done
//
// A Lock's Done is closed by a timer at its validity deadline, measured
// from before the request that set the key's TTL (Obtain's, the token's,
// or [Lock.Refresh]'s), so the key outlives it as long as Redis's clock
// and this process's run at the same rate; when a Refresh fails; and on
// [Lock.Release]. A Guard then refuses writes locally. A holder paused
// past its deadline learns nothing until it runs again, and its write may
// already be on its way: the resource's check, with the token, is what
// refuses it.
//
// # What the token is worth
//
// The counter is as durable as the Redis that holds it. A restart without
// persistence, a FLUSHALL, an eviction (under an allkeys-* maxmemory
// policy) or a failover to a replica that had not received the latest
// increments sets it back: tokens then repeat or fall. A repeated token
// is accepted by a resource as the same holder writing again, so run the
// counter's Redis with persistence (appendonly) and no eviction of it. A
// resource whose floor is above every token the counter will issue for a
// while refuses every holder's writes ([fence.ErrStale]), which is safe
// but stops work: move the counter above the floor (SET it) to recover.
package redisholder
