// Package dynamofence makes DynamoDB a fenced resource: a [Store] refuses
// a write carrying a lower fencing token than the item has accepted, and a
// [Table] does the same for updates of items of your own tables, alone or
// several in one transaction ([Transact]). Every write is a conditional
// UpdateItem (or TransactWriteItems): DynamoDB checks the token and writes
// atomically, so DynamoDB, not the writer, has the last word.
//
// The import path is github.com/fencelock/fencelock/fence/dynamodb; the
// package is named dynamofence so that it does not read as the SDK's.
//
//	ddb := dynamodb.NewFromConfig(cfg) // aws-sdk-go-v2
//	store, err := dynamofence.New(ddb, "fences")
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
// # Layout
//
// A [Store]'s table has a partition key of type S ([WithKeyAttribute],
// default "key") and no sort key; [CreateStoreTable] creates one. Resource
// key K is the item whose key is K, with the attributes fence_floor (the
// highest token accepted or claimed), fence_token and fence_value (the
// record; both NULL once deleted), fence_version (a count of the writes,
// which [Store.Update] compares) and fence_write (the id of the Update
// write that stored the record). Tokens are strings of 19 digits, which
// DynamoDB compares byte by byte: exact on every server (minidyn compares
// numbers as float64, equal above 2^53).
//
// A [Table] writes your own table's items: the attributes your update
// names, and the token attribute you name, holding as 19 digits the
// highest token that has written or claimed the item. A Table's update is
// applied as DynamoDB applies it: one delivered twice by something
// between you and DynamoDB (a proxy that resends) lands twice if the token
// allows both, so prefer updates that are the same applied twice (SET
// over ADD), or a Store's Update, which tells its own second copy apart.
//
// # Reading before you write
//
// A newer holder that reads with a plain GetItem while an older holder's
// write is on its way, and writes back what it computed, loses that write
// with no error anywhere. So read with the token, as the first touch:
// [Store.GetForUpdate] and [Table.GetForUpdate] raise the floor and return
// the item as it was in one UpdateItem (ReturnValues ALL_OLD). For a read,
// a change and its write, [Store.Update] reads that way, calls your
// function, and writes its result only if the version is still the one
// read.
//
// # Several keys, all or nothing
//
// [Store.UpdateAll] (a [fence.AllUpdater]) claims several keys, each with
// its own token, reads them, calls your function with all the records,
// and writes its values in one TransactWriteItems whose every item is
// conditioned on its floor and its version: a transfer between two
// accounts lands whole or not at all, where two Updates are half applied
// when the holder stops between them. [Store.UpdateHeld] takes the tokens
// from an *etcdlock.MultiLock. A holder whose tokens are the floors
// already reads the items with one consistent BatchGetItem; its first
// touch raises each floor with an UpdateItem, all sent at once. Up to
// [MaxTxWrites] keys. ([Transact] is the same transaction for the items
// of your own [Table]s, with no read.)
//
// # Side effects: the outbox
//
// An [Outbox] records side effects (an email, a webhook call: an
// outbox.Effect) in the same TransactWriteItems as the fenced write of a
// Store's record ([Outbox.Update], [Outbox.UpdateAll]), so that an effect
// exists if and only if its write landed, and is the outbox.Log an
// outbox.Dispatcher delivers them from, in order per resource, fenced on
// the dispatcher's own floor. Its items live in a table of their own
// ([CreateOutboxTable]: a sort key, and a local secondary index on the
// recording position); a dispatcher polls it (DynamoDB Streams are
// another service). Recording needs TransactWriteItems: no counter item
// is shared by the writers, so recording writes on different records do
// not contend.
//
// # Requests that arrive late, twice, or lose their reply
//
//   - Late: DynamoDB evaluates the condition when it applies the write, so
//     a request held up until a newer token has written is refused.
//   - Twice: the AWS SDK resends a request whose reply was lost (3
//     attempts by default). A resent conditional write whose first copy
//     landed is refused by its own floor, or after a newer token's write,
//     and would say stale of a write that landed. So every request of
//     this package is sent once, with the SDK's retries off for it, and a
//     lost reply (no answer, or a 5xx) gives [fence.ErrUnknownOutcome].
//     The client's retries stay on for everything else.
//   - A 4xx answer is a refusal and nothing was written ([ErrNoTable] for
//     a table that does not exist; the SDK's error otherwise), but for
//     TransactionInProgressException: another copy of the same
//     transaction is still running and may commit, so it is
//     [fence.ErrUnknownOutcome] too.
//
// # DynamoDB-compatible servers
//
// The tests run against minidyn's HTTP server (a DynamoDB emulator in Go)
// through the real SDK client. [Store.CheckConditions] checks that a
// server refuses a write whose condition fails; run it once against
// anything that is not AWS. Global tables replicate between regions
// asynchronously, last writer wins: fence within one region.
//
// A nil context or client (a typed nil *dynamodb.Client too) gives an
// error matching [ErrInvalidArgument], never a panic, before any I/O.
//
// This package depends on the AWS SDK's DynamoDB client; package fence
// does not, and a program that does not import this package does not link
// it.
package dynamofence
