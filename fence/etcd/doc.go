// Package etcdfence makes etcd keys a fenced resource: a [Store] refuses a
// write carrying a lower fencing token than the key has accepted, and etcd,
// not the writer, has the last word.
//
// The import path is github.com/fencelock/fencelock/fence/etcd; the package
// is named etcdfence so that it does not read as etcd's own.
//
//	store, err := etcdfence.New(cli, "/app/fences/") // cli is a *clientv3.Client
//	if err != nil {
//		return err
//	}
//	g, err := fence.NewGuard(lock) // lock is an *etcdlock.Lock
//	if err != nil {
//		return err
//	}
//	err = g.Put(ctx, store, "scheduler/state", data)
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing was written.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// No answer; read back with store.Get before deciding.
//	}
//
// # Which fence for etcd: this Store, or Lock.Held
//
// A holder of an etcdlock lock that writes its own keys in the same etcd
// cluster as the lock has a stronger fence than any Store:
// etcdlock's Lock.Held (and Term.Held) is a clientv3.Cmp that holds only
// while the lock's key still exists with the lock's token. Put it in the If
// of the holder's own transaction, and the write applies only while the lock
// is held, checked in the same raft entry as the write; no floor is kept,
// and any transaction of the user's (several keys, deletes, reads) can be
// fenced. Use Held for that.
//
// Use a Store when Held does not fit: the lock lives elsewhere (another etcd
// cluster, another lock service) and only its token reaches the writer; a
// resource is written under several lock names, or by holders of locks
// that come and go, so that it must remember the highest token it has seen
// rather than ask one lock; or the code writes through [fence.Store], as it
// would to fence/postgres or fence/s3, and etcd is one backend of several.
// A Store's fence is the token order, not the lock's liveness: a holder
// whose lock has ended but to whom no newer token has been issued can still
// write.
//
// # Layout
//
// For a resource key K, under the prefix P given to [New]:
//
//	P + "floor/" + K   the highest token accepted for K: 19 decimal digits,
//	                   zero-padded ([TokenDigits]), so that etcd's byte-wise
//	                   compare of values orders tokens as numbers
//	P + "data/" + K    the record: the same 19 digits (the token of the
//	                   write that stored it), then the value's bytes
//
// [Store.FloorKey] and [Store.DataKey] return them. The keys carry no lease.
// etcdctl get P --prefix shows them; a value read without this package
// starts with its token.
//
// # How a write is fenced
//
// [Store.Put] is one etcd transaction, one raft entry, in one of two
// forms:
//
//	first:  If(Value(floor) > token-1)  Then(Get(floor))
//	        Else(Put(floor, token), Put(data, record))
//	again:  If(Value(floor) ≤ token, ModRevision(floor) ≤ seen)
//	        Then(Put(floor, token), Put(data, record))  Else(Get(floor))
//
// The first is a holder's first write of the key: it lands on a floor of
// a lower token, or on none (etcd fails every Value compare on a missing
// key, so the first write to a key takes the Else branch). The second is
// its writes after that: it lands on a floor of its own token (or a lower
// one) put no later than seen, the highest revision the Store has read in
// a reply. A higher token refuses either, and the refusal reads the floor,
// which becomes the Current of the *[fence.StaleError]. The compares run
// when etcd applies the entry, so a request that arrives late, after a
// newer token's write, is refused however long it was held up; a request
// whose reply is lost was applied whole or not at all, and Put says
// [fence.ErrUnknownOutcome]. The one rule for which errors leave the
// outcome unknown is stated on [Store.Put].
//
// The compare of the floor's mod revision keeps a holder's writes in the
// order it made them. Every write puts the floor, so a copy of a write
// delivered twice, or a write that arrives late after a later write of the
// same token landed (from this Store or from another process the token
// was passed to), finds the floor put past its seen, or, in the first
// form, a floor of its own token, and changes nothing: without that, such
// a copy would replace the later write, since the floor does not fence a
// token against itself. The Store sends the form it expects to land, from
// its last write or claim of the key; when the floor was not as it
// expected (a write of the token it did not see, the floor deleted by
// other means), the write is sent again, in the other form or with the
// reply's revision as its seen.
//
// The value is carried once per request, so a value may be nearly as large
// as etcd's --max-request-bytes (1.5 MiB by default): larger ones are
// refused, before I/O, with [ErrValueTooLarge] ([WithMaxRequestBytes]).
// etcd is built for small values; keep them to kilobytes.
//
// # Reading before you write
//
// Fencing the writes is not enough when what is written depends on what
// was read. A newer holder that reads with [Store.Get] while an older
// holder's write is still on its way, and writes back what it computed,
// loses that write with no error on either side: the older write landed
// legitimately, since nothing higher had been written yet. So read with
// the token, as the first touch of the key: [Store.GetForUpdate] raises
// the floor to it as it reads, and from then on the older write is refused.
// For a read, a change and its write, use [Store.Update]: it reads that
// way, calls your function, and writes its result only if the floor and
// the record are still the ones read (compares of their mod revisions),
// trying again on a change, up to [fence.UpdateAttempts] times.
//
//	err := store.Update(ctx, "acct/A", token, func(old fence.Record) ([]byte, error) {
//		balance, err := parse(old.Value) // old is the zero Record for a new key
//		if err != nil {
//			return nil, err // nothing is written; Update returns it
//		}
//		return format(balance - 100), nil
//	})
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder has touched the key; nothing was written.
//	case errors.Is(err, fence.ErrConflict):
//		// The record kept changing under writers with this token.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// The write's reply was lost: it landed once or not at all.
//	}
//
// A holder whose token is the floor already reads with one read-only
// transaction; only its first touch raises the floor, in a second one.
// Use Get only for reads no write of yours follows. Through a [fence.Guard],
// g.GetForUpdate and g.Update do the same with the lock's token.
//
// # Several keys, all or nothing
//
// A transfer between two accounts written as two Updates is half applied
// when its holder stops between them and a newer holder goes on: the
// debit landed, the credit is refused. [Store.UpdateAll] (a
// [fence.AllUpdater]) claims several keys, each with its own token, reads
// them, calls your function with all the records, and writes its values
// in one etcd transaction that compares every key's floor and mod
// revision: all of them land, or none. [Store.UpdateHeld] takes the
// tokens from an *etcdlock.MultiLock (a [fence.Claimer]):
//
//	held, err := locks.LockAll(ctx, []string{"acct/A", "acct/B"})
//	…
//	err = store.UpdateHeld(ctx, held, func(old map[string]fence.Record) (map[string][]byte, error) {
//		a, b := parse(old["acct/A"].Value), parse(old["acct/B"].Value)
//		return map[string][]byte{"acct/A": format(a - 100), "acct/B": format(b + 100)}, nil
//	})
//
// A newer holder on any of the keys gives a *[fence.StaleError] naming
// it, with nothing written. It costs one read-only transaction and one
// write, as Update does (one more, raising the floors together, on a
// holder's first touch), up to [MaxUpdateAllKeys] keys.
//
// # Deleting
//
// [Store.Delete] deletes the data key and raises the floor, in the same
// transaction and under the same condition as a Put: the floor outlives
// the record, as fence/s3's tombstone does, so a stale Put after a delete
// is refused. Deleting the floor key by other means (etcdctl del, a lease)
// resets it: the next Put lands whatever its token. Keep leases and
// deletes by prefix off P.
//
// # Effects: an outbox
//
// An [Outbox] records side effects (an [outbox.Effect]: an email, a
// webhook call) in the same transaction as the fenced write they belong
// to, under a prefix of its own, so that they exist if and only if the
// write landed; a dispatcher (outbox.Dispatcher) delivers them from it:
//
//	ob, err := etcdfence.NewOutbox(store, "/app/outbox/")
//	err = ob.Update(ctx, "order/42", token, func(old fence.Record) ([]byte, []outbox.Effect, error) {
//		return paid(old.Value), []outbox.Effect{{Resource: "order/42", Token: token, Seq: 0,
//			Destination: "https://mail.example/send", Payload: receipt}}, nil
//	})
//
// A write refused as stale records nothing. Effect keys are ordered by
// the revision of the write that recorded them; [Outbox.Settle] deletes
// (or marks parked) the delivered ones in one transaction fenced on the
// dispatcher's own floor key, and [Outbox.Watch] wakes a dispatcher when
// one is recorded.
//
// A nil context or client (a typed nil *clientv3.Client too) gives an error
// matching [ErrInvalidArgument], never a panic, before any I/O.
//
// This package depends on etcd's client; package fence does not.
package etcdfence
