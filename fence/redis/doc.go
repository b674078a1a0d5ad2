// Package redisfence makes Redis a fenced resource: a [Store] refuses a
// write carrying a lower fencing token than the key has accepted, and a
// [Hash] does the same for fields of your own hashes. Every write is one
// Lua script, which Redis runs atomically: the compare and the write
// cannot be split by another client's command.
//
// The import path is github.com/fencelock/fencelock/fence/redis; the
// package is named redisfence so that it does not read as go-redis's.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	store, err := redisfence.New(rdb, "app:fences:")
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
// A [Store] keeps resource key K in the hash prefix+K ([Store.Key]), with
// the fields floor (the highest token accepted or claimed), token and
// value (the record: the token of the write that stored it, and its
// bytes), and version (a count of the writes, which [Store.Update]
// compares). Tokens are stored as [TokenDigits] decimal digits. HGETALL
// shows a record.
//
// A [Hash] writes your own hashes: the fields you give it, and the token
// field you name, holding the highest token that has written or claimed
// the hash.
//
// # Reading before you write
//
// Fencing the writes is not enough when what is written depends on what
// was read: a newer holder that reads while an older holder's write is
// still on its way, and writes back what it computed, loses that write
// with no error on either side. So read with the token, as the first
// touch: [Store.GetForUpdate] and [Hash.GetForUpdate] raise the floor as
// they read, in one script, and from then on the older write is refused.
// [Store.Update] and [Hash.Update] read that way, call your function, and
// write its result only if what was read is unchanged (the version, or
// the fields read), trying again on a change up to [fence.UpdateAttempts]
// times.
//
// # Several keys, all or nothing
//
// [Store.UpdateAll] (a [fence.AllUpdater]) claims several keys, each with
// its own token, reads them, calls your function with all the records,
// and writes its values in one script that checks every key's floor and
// version before it writes any: a transfer between two accounts lands
// whole or not at all, where two Updates are half applied when the holder
// stops between them. [Store.UpdateHeld] takes the tokens from an
// *etcdlock.MultiLock. One script touches keys of one hash slot only, so
// the keys must share one ([Slot]): give them a hash tag, in the keys
// ("acct:{42}:a", "acct:{42}:b") or in the Store's prefix. Keys of two
// slots are refused with [ErrCrossSlot] before any I/O, on one server as
// on a cluster, so that code tested on one moves to the other.
//
// # Requests that arrive late, twice, or lose their reply
//
//   - Late: the compare runs when Redis runs the script, against the floor
//     as it is then, so a paused holder's request is refused after a newer
//     token's write however long it was held up.
//   - Twice: go-redis resends a command whose connection broke after it
//     was written (MaxRetries, 3 by default). A resent copy of a write
//     that had landed would be refused after a newer token's write and say
//     stale of a write that landed; so every script of this package is
//     sent once, and a reply that is lost gives an error matching
//     [fence.ErrUnknownOutcome]. A script that was never sent (a dial
//     error, a pool timeout, a closed client) says so, and wrote nothing.
//   - Reply lost: a script is applied whole or not at all. Each script
//     checks everything before its first write command, so a script Redis
//     refuses (OOM, READONLY, NOPERM, BUSY, a key of another type) wrote
//     nothing. An error reply Redis does not give (a proxy's own, after it
//     forwarded the script) leaves the outcome unknown.
//
// go-redis waits for a reply as long as its ReadTimeout (3 s by default),
// whatever the context says, unless the client has ContextTimeoutEnabled:
// set it for the context to bound the calls of this package.
//
// A *redis.Ring is refused: it moves a key to another shard when its
// shard misses its heartbeats or a shard is added, where the key has no
// floor. A redis.Pipeliner is refused too (it only queues). Use a
// *redis.Client, a *redis.ClusterClient, or a *redis.Conn.
//
// # What a failover can do
//
// Redis replicates asynchronously. A write (or a claim) acknowledged by
// the primary and not yet copied to a replica is lost if that replica is
// promoted: the floor goes back, and a stale token's write that the old
// primary refused can land on the new one. No script can prevent it; the
// fence is as durable as the primary's last acknowledged write.
//
// WAIT numreplicas timeout, sent after a write on the same connection (a
// Store or Hash made on rdb.Conn(), then conn.Wait), returns how many
// replicas have acknowledged it. It narrows the window
// (a failover to a replica that has the write keeps the floor) but does
// not close it: WAIT does not make the write transactional across
// replicas, a write WAIT timed out on is still applied on the primary, and
// Sentinel or Cluster may promote a replica that missed it. With
// appendfsync always and WAITAOF (Redis 7.2) the primary's own copy
// survives a restart. Where a lost fence costs more than a lost write,
// keep the data in a store whose writes are replicated before they are
// acknowledged (PostgreSQL with synchronous replication, etcd), or fence
// Redis and check the token again in a store that is.
//
// Eviction and expiry remove floors too: a hash deleted by DEL, EXPIRE or
// a maxmemory policy that may evict it loses its floor, and the next write
// lands whatever its token. Keep fenced keys out of eviction
// (maxmemory-policy noeviction, or volatile-* with no TTL on them).
//
// A nil context or client (a typed nil *redis.Client too) gives an error
// matching [ErrInvalidArgument], never a panic, before any I/O.
//
// This package depends on go-redis; package fence does not, and a program
// that does not import this package does not link go-redis.
package redisfence
