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
//	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // never wait forever
//	defer cancel()
//	lock, err := locks.Lock(waitCtx, "billing-run") // waitCtx bounds the wait, not the lock or the writes
//	if err != nil {
//		return err
//	}
//	defer func() {
//		// Bounded: etcd may be unreachable. If this fails, the Client keeps
//		// retrying in the background while its session lives.
//		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//		defer cancel()
//		if err := lock.Unlock(ctx); err != nil {
//			log.Printf("unlock: %v", err) // errors.Is(err, etcdlock.ErrLost): it was lost before
//		}
//	}()
//	guard, err := fence.NewGuard(lock)
//	...
//	err = guard.Put(ctx, store, "invoice/42", data) // the caller's ctx; refused by the store if a newer holder wrote
//
// A nil context, a nil (or typed-nil) etcd client, a nil function, or a
// call that takes a context on a nil or zero Client, Lock, Term, Semaphore
// or MultiLock, or LeaderHealth's Check (one no constructor made), gives an
// error matching [ErrInvalidArgument], never a panic, before any request
// (WriteRefused, which returns nothing, does nothing). Accessors (Token,
// Name, Key, Done, Err, ...) read the value, and on a nil one panic, as
// os.File's Name does.
//
// # Elections
//
// [Client.Campaign] makes the caller a candidate in an election; it returns
// a [Term] once the candidate leads. Candidates wait in the same fair queue
// as lockers, and a Term is a [fence.Holder] like a Lock, with
// [Term.Proclaim] to publish a new value and [Term.Resign] to step down.
// [Client.Leader] and [Client.Observe] read the leader; [Client.Run] is the
// whole loop of "one active instance":
//
//	err := locks.Run(ctx, "scheduler", addr, func(ctx context.Context, term *etcdlock.Term) error {
//		guard, err := fence.NewGuard(term) // every write of the term carries its token
//		...
//		<-ctx.Done() // ends with the term: lost, validity deadline passed, or client closed
//		return nil
//	})
//
// A [LeaderHealth] given to Run ([WithLeaderHealth]) is an http.Handler for
// a liveness probe: 503 while a lead function runs past its term's
// validity deadline, or too long after its context was cancelled.
//
// # Read/write locks, semaphores, several names
//
// [Client.RLock] takes a lock as a reader: readers share it, writers
// ([Client.Lock] on the same name) exclude everyone, and a waiting writer
// holds back the readers that come after it, so writers are not starved.
// Every holder has a token; a writer's is greater than every earlier
// holder's, so a resource fenced with the tokens of every holder refuses a
// deposed writer's late write. Readers that hold together carry different
// tokens: a resource readers write to cannot be fenced across readers by
// "refuse anything lower" (it would refuse the innocent older one).
//
// [Client.Semaphore] gives a counting semaphore: at most its permits held
// at once, in arrival order. Each permit has a slot ([Lock.Slot]) whose
// tokens increase from one holder to the next: fence a resource owned by
// slot i (shard i of a pool of workers) with slot i's tokens. The
// semaphore bounds how many work at once; it does not fence a resource
// all of them share.
//
// [Client.LockAll] takes several locks, all or none, without deadlock
// between callers that ask for overlapping sets in any order; each name
// has its lock and token, and [MultiLock.Done] closes when any is lost.
//
// [Client.Group] gives N partitions (shards of a queue, tenant ranges)
// shared by the workers that [Group.Join] it: each partition is owned by
// one worker at a time, with a token strictly greater than every earlier
// owner's of that partition, and every live worker owns a fair share,
// rebalanced (few partitions moved) as workers come and go. A partition
// is owned again within TTL + 1 s of its release or its owner's lease
// expiry, and a work's writes sent with [Partition.WriteContext] are not
// cut off in flight when a rebalance moves it.
//
// When to use which: one worker at a time on a resource, [Client.Lock];
// a pool of N workers, a semaphore, each worker fencing the shard of its
// slot; N shards spread over a fleet that grows and shrinks, a group,
// each partition's owner fencing the partition's resources; many readers of a configuration and a rare writer, a read/write
// lock, the writer's writes fenced; a transfer between two accounts,
// LockAll of both, each account's writes fenced with its own lock's
// token.
//
// # Who holds a lock
//
// Every key carries a record of its owner ([WithOwner]), the acquisition
// time and optional metadata ([WithMetadata]). [Client.Inspect] reads a
// lock's holder and waiters; [Client.Status] reads the names of every
// kind (locks, elections, semaphores and groups) at one revision, and
// [Client.WatchStatus] follows them with a watch, for a live view; the
// error of a refused TryLock is a [*LockedError] naming the holder.
//
// # Telemetry
//
// A Client reports through the OpenTelemetry API, to the global providers
// unless [WithMeterProvider] and [WithTracerProvider] say otherwise (they
// record nothing until the application installs an SDK), and logs through
// the *slog.Logger of [WithLogger] (none by default). Metrics, with the
// attribute fencelock.kind ("lock", "read", "semaphore", "election", or a
// group's "member" and "partition") and, on request
// ([WithNameAttribute]), fencelock.name:
//
//   - fencelock.lock.wait.duration (s): every acquisition (Lock, RLock, a
//     Semaphore's Acquire, Campaign, and their Try forms), by
//     fencelock.outcome: acquired, locked, timeout, cancelled, error
//   - fencelock.lock.hold.duration (s): until released or lost
//   - fencelock.lock.acquisitions, fencelock.lock.holders,
//     fencelock.lock.waiters
//   - fencelock.lock.losses, by fencelock.cause: lease_expired,
//     validity_expired, key_deleted, client_closed, other
//   - fencelock.lock.release.failures, fencelock.lock.cleanup.retries
//   - fencelock.session.keepalive.duration (s), fencelock.session.validity.margin
//     (s: the validity deadline minus now after each acknowledged keepalive;
//     alert when it falls below a third of the TTL),
//     fencelock.session.replacements
//   - fencelock.election.leader.changes (seen by Observe)
//   - fencelock.group.partitions (partitions of groups this worker owns
//     now) and fencelock.group.handoffs (released because a rebalance
//     moved them or the worker left), without fencelock.kind
//   - fencelock.writes and fencelock.write.duration (s): the writes a
//     [fence.Guard] refused locally ([Lock.WriteRefused]), by
//     fencelock.adapter "guard", fencelock.operation "write" and
//     fencelock.outcome "lock_lost" (no fencelock.kind or name)
//
// The spans of the acquisitions, etcdlock.Lock, TryLock, RLock, TryRLock,
// Acquire, TryAcquire, Campaign, Join and Partition (with the token and
// lease once acquired), of the releases, etcdlock.Unlock, Resign, Leave
// and Handoff, and guard.write (a refused write, with the name and token)
// are children of the caller's context. Log lines: acquisitions and releases at debug level, losses,
// failed releases, lost sessions and refused writes at warn, each with the
// name, token, lease and cause.
//
// # What a lock does and does not guarantee
//
// etcd grants the lock to one holder at a time. But a holder can be paused
// (GC, CPU starvation, VM migration, partition) for longer than its lease,
// and then act on a lock it no longer holds; Done closes when the process
// notices, which a paused process cannot do. Only the resource can refuse the
// late write, by comparing tokens: see package fence.
//
// # Requests that arrive late, twice, or lose their reply
//
// Every request the package sends is safe to be delivered after its caller
// gave up, delivered twice, or applied with its reply lost:
//
//   - Deletes compare the key's create revision, so they never remove
//     another acquisition's key, even one that reuses the same key name.
//   - Each session hands out numbered lanes, and each lane has a marker key
//     under prefix+"slot/". Every create compares the marker's mod revision
//     with the one last seen and every release writes it, so a create of an
//     earlier acquisition cannot land once that acquisition was released.
//   - A waiter checks its own key with a linearizable read before it is
//     granted the lock.
//   - A failed Unlock keeps being retried in the background.
//
// The session keeps one marker key per lane (its peak number of concurrent
// acquisitions) until it ends.
//
// # Compared with concurrency.Mutex
//
// Compared with go.etcd.io/etcd/client/v3/concurrency.Mutex, this package:
//
//   - removes the key of a Lock whose context ends (also during the first
//     request, and retrying in the background while etcd is unreachable);
//   - gives two acquisitions in one process sharing a session distinct keys
//     and tokens;
//   - never deletes another holder's key on Unlock;
//   - tells the holder when its lease is lost ([Lock.Done]);
//   - never hands the lock to a waiter whose session expired;
//   - hands the lock over without etcd's 100 ms catch-up delay for watchers
//     that start from an old revision.
//
// # Keys and permissions
//
// All keys live under the prefix ([WithPrefix], default "/fencelock/"):
// lock queue keys under prefix+"lock/"+name+"/" (a reader's key's last
// segment begins with "r"), election candidates under
// prefix+"elect/"+name+"/", a semaphore's queue under
// prefix+"sem/"+name+"/q/" and its permits' slots under
// prefix+"sem/"+name+"/p/", lane markers under prefix+"slot/"; in keys, a
// name's '%' is spelled %25 and its '/' %2F (tenant/42 is tenant%2F42). With etcd
// authentication on, grant the role readwrite on the whole prefix (a grant
// on prefix+"lock/" alone fails: every create reads a lane marker):
//
//	etcdctl role grant-permission ROLE readwrite /fencelock/ --prefix
//
// A missing grant makes Lock and TryLock fail at once with a
// [*PermissionError] naming the prefix. The Client logs in (when clientv3
// has a user and password) only when it opens a gRPC stream: its keepalives
// share one long-lived stream, and a watch refused because its stream's
// auth token expired moves to a new stream.
//
// # Testing code that holds a lock
//
// Package [github.com/fencelock/fencelock/etcdlock/etcdlocktest] starts
// etcd inside a test and makes a holder lose its lock on demand (a
// partition, a revoked lease, a deleted key, a crashed member), so that a
// test can check that the holder stops and that its late writes are refused.
// Importing etcdlock alone does not link the etcd server.
package etcdlock
