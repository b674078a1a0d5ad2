// Package pgadvisory fences writes with a PostgreSQL advisory lock: a
// [Lock] is a session-level advisory lock (pg_advisory_lock) held on a
// connection of its own, with a fencing token taken from a sequence
// (nextval) while the lock is held, and a [fence.Holder] for a
// [fence.Guard].
//
// An advisory lock hands out no token, and its key cannot be ordered. The
// sequence's values only grow, and each is taken by a session that holds
// the lock, so the holders' tokens grow in the order they held it:
//
//	// Once, as a migration: pgadvisory.CreateSequence(ctx, pool)
//	l, err := pgadvisory.Acquire(ctx, cfg, 42) // cfg from pgx.ParseConfig
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	g, err := fence.NewGuard(l)
//	if err != nil {
//		return err
//	}
//	err = g.Put(ctx, store, "invoice-42", data) // fence.ErrStale if a newer holder wrote
//
// The resource the guard writes to need not be this database: any
// [fence.Store] (fence/postgres, fence/redis, fence/s3, …) takes the
// token.
//
// # Done
//
// A session lock lasts as long as its session. A Lock's Done closes when
// the session ends (the server closes the connection: an administrator's
// pg_terminate_backend, idle_session_timeout, a restart: noticed at once,
// since the Lock waits on the connection between pings), when a ping
// does not answer within [WithPingInterval] (the server is unreachable:
// it may end the session, and another client take the lock, without this
// one hearing of it), and on [Lock.Release]. [Lock.Err] says why.
//
// By default a session does not expire while its process is paused, so a
// frozen holder keeps the lock, and the next one waits, until the process
// runs again or something ends the session (pg_terminate_backend). With
// [WithSessionTimeout] the session is a lease: the server ends it once it
// has been idle that long (idle_session_timeout, PostgreSQL 14 and
// later), the Lock's pings keep a live one going, and [Lock.ValidUntil]
// is its deadline. A holder whose session the server ended while it was
// paused learns of it when it runs again, maybe after its write was sent:
// the resource's check, with the token, is what refuses that write.
//
// # What the token is worth
//
// The sequence is as durable as the database: a failover to a replica
// that had not received its latest values (asynchronous replication) can
// hand out a token again, which a resource accepts as the same holder
// writing. The advisory lock does not survive a failover either.
package pgadvisory
