// Package fence makes a distributed lock safe to rely on by letting the
// resource, not the lock, have the last word.
//
// A lock holder can be paused (a GC pause, a throttled container, a VM
// migration, a partition) after it has checked that it holds the lock and
// before its write lands. Meanwhile its lease expires and a new holder takes
// the lock and writes. No lock can stop the old holder's late write; only the
// resource can, by refusing writes that carry an older fencing token.
//
// # The contract every adapter obeys
//
// The contract is written on [Store]. Every adapter's Store obeys it, and
// every other fenced write in fence/postgres and fence/s3 obeys its rules
// for Put. The conformance suite in fence/fencetest checks it; every adapter
// runs it against a real server.
//
// # Guard
//
// A [Guard] wraps a [Holder] (an *etcdlock.Lock) and carries its token into
// each write:
//
//	lock, err := locks.Lock(ctx, "invoice-42")
//	if err != nil {
//		return err
//	}
//	defer func() {
//		// Bounded (etcd may be unreachable), and not by ctx, which may have ended.
//		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
//		defer cancel()
//		lock.Unlock(ctx)
//	}()
//	g, err := fence.NewGuard(lock)
//	if err != nil {
//		return err
//	}
//	err = g.Put(ctx, store, "invoice-42", data)
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; this write changed nothing.
//	case errors.Is(err, fence.ErrLockLost):
//		// We knew we had lost the lock; nothing was sent.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// Read back before deciding.
//	}
//
// A lock from another library fences writes too: [NewHolder] makes a
// Holder of a token the caller takes with its lock and a channel closed
// when the lock ends; fence/redisholder does it for bsm/redislock and
// fence/pgadvisory for a PostgreSQL advisory lock (docs/holders.md).
//
// The guard's own check ([Guard.Check]) is only an optimisation that saves a
// round trip when the holder already knows its lock is gone. The resource's
// check is the guarantee.
//
// # Reading before you write
//
// Fencing writes is not enough for a critical section that reads, computes
// and writes back: a newer holder that reads while an older holder's late
// write is still to land, and then writes what it computed, loses that
// write with no error anywhere. The first touch must claim the resource.
// Every adapter's Store is an [Updater]: [Updater.GetForUpdate] raises the
// resource's floor to the token as it reads, and [Updater.Update] is the
// read-modify-write in one call; [Guard.GetForUpdate] and [Guard.Update]
// carry a holder's token into them:
//
//	err := g.Update(ctx, store, "invoices-sent", func(old fence.Record) ([]byte, error) {
//		return increment(old.Value) // old is the zero Record when there is no value
//	})
//
// [Store.Get] is a plain read that claims nothing. docs/reading.md has the
// transfer between two accounts.
//
// # Several resources, all or nothing
//
// Two Updates are two writes: a transfer between two accounts whose holder
// stops between them, while a newer holder goes on, is half applied. The
// stores whose server writes several keys atomically (fence/etcd,
// fence/redis, fence/dynamodb, and [MemoryStore]) are [AllUpdater]s too:
// [AllUpdater.UpdateAll] claims several keys, each with its own token (a
// [Claim]), passes all their records to one [UpdateAllFunc], and writes
// its values all or nothing; [UpdateHeld] takes the claims from a
// [Claimer] such as an *etcdlock.MultiLock:
//
//	err := fence.UpdateHeld(ctx, store, multiLock, func(old map[string]fence.Record) (map[string][]byte, error) {
//		a, b := parse(old["acct/A"].Value), parse(old["acct/B"].Value)
//		return map[string][]byte{"acct/A": format(a - 100), "acct/B": format(b + 100)}, nil
//	})
//
// S3 and GCS have none; docs/reading.md has the shapes that are safe
// there.
//
// # Tokens from two issuers
//
// Tokens of two sources (two lock services, two counters) cannot be
// ordered against each other. A holder that names its source
// ([IssuerNamer]: [NewHolder] with [WithIssuer], fence/redisholder,
// fence/pgadvisory) has its Guard pass the name with each write; the
// stores that check it record a key's issuer and refuse another's tokens
// with [ErrIssuerMismatch] instead of comparing them. [MemoryStore]
// checks it on every write and claim, and fence/postgres's Store on its
// writes and claims when made with its issuer column; the other stores
// ignore it, and a write or a floor that names none is not checked,
// unless the store requires issuers ([RequireIssuer], fence/postgres's
// RequireIssuer): then a write that names none is refused before any I/O
// with [ErrIssuerRequired]. fencetest.RunIssuers and
// fencetest.RunRequiredIssuer are the checks.
//
// # Writing an adapter
//
// The read-modify-write loop is written once, here: [RunUpdate] runs the
// rounds of an Update (claim and read, fn, conditional write, again on a
// change up to [UpdateAttempts], then [ErrConflict]) over an adapter's
// [UpdateRounds], which supplies the claim-and-read and the conditional
// write and says [ErrChanged] when the record changed. The loop checks
// the arguments before any I/O and starts the span of an [UpdateTracer].
// [RunUpdateAll] is the same loop over an [UpdateAllRounds]. Every
// adapter of this module is built on them; the example of RunUpdate is an
// adapter over a map that passes fence/fencetest.
//
// A nil context, holder, store or write function (a typed nil pointer in an
// interface too) gives an error, never a panic, before anything is called.
//
// This package depends on the standard library only.
package fence
