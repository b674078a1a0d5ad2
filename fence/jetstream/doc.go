// Package jsfence makes the entries of a NATS JetStream key-value bucket
// a fenced resource: a [Store] refuses a write carrying a lower fencing
// token than the key holds, with JetStream's own condition on the key's
// last revision (kv.Update, or kv.Create for a key with no entry).
//
// The import path is github.com/fencelock/fencelock/fence/jetstream; the
// package is named jsfence so that it does not read as the client's.
//
//	js, err := jetstream.New(nc) // github.com/nats-io/nats.go/jetstream
//	kv, err := js.KeyValue(ctx, "fences")
//	store, err := jsfence.New(kv)
//	err = store.CheckRevisions(ctx) // once: the server honours revisions
//	g, err := fence.NewGuard(lock) // lock is an *etcdlock.Lock
//	err = g.Put(ctx, store, "scheduler/state", data)
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing was written.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// No answer, and the read after it did not find the write.
//	}
//
// # Layout
//
// Resource key K is the bucket's key prefix+K ([WithPrefix]); keys are
// what a bucket takes (letters, digits and -/_=., no leading, trailing or
// double dot), checked before any request. Each entry's value begins with
// a header of [HeaderSize] bytes: the magic "fencejsk", a flags byte (a
// record follows, or none: deleted, or claimed before any value), the
// token, 8 bytes big-endian, and a random id of the write; the value
// follows.
//
// # How a write is fenced
//
// A write knows the key's last revision and header (from this Store's
// last write or read of the key, or from reading it), refuses a higher
// token, and writes with kv.Update on that revision (kv.Create for a key
// with no entry, or whose last entry is a deletion). The server stores it
// only if the key's last revision is still that one
// (Nats-Expected-Last-Subject-Sequence); else it refuses, and the write
// reads the key and decides again, up to [fence.UpdateAttempts] times.
// Revisions are the stream's sequence numbers, which never repeat while
// the bucket lives (see below for a bucket recreated), so a
// write cannot land on an entry that changed and changed back, and a
// write arriving late finds its revision gone, and then the newer token.
//
// # Lost and duplicated requests
//
// A write whose answer does not come within its request timeout
// ([WithRequestTimeout]) is followed by a read: if the key holds the
// write's id, it landed, and the call returns nil; if not, the error
// matches [fence.ErrUnknownOutcome] (it may have landed and been written
// over, or be still on its way, where its revision will refuse it if
// anything was written since). A copy of a write delivered twice is
// refused by the revision its first copy wrote; the write then reads the
// key, finds its own id, and is done, without writing again (and [Store.Update]
// without calling fn again). Nothing is ever resent blindly.
//
// # Reading before you write
//
// [Store.GetForUpdate] reads the key and writes it back with the token
// on the revision read (even when it holds the token already): the claim;
// an older holder's late write is refused from then on. [Store.Update]
// claims, calls your function, and writes its result on the claim's
// revision.
//
// # What JetStream cannot do
//
//   - There is no UpdateAll ([fence.AllUpdater]): a bucket has no
//     conditional write of several keys at once in nats-server 2.9 (atomic
//     batches came in 2.12).
//   - The floor lives in the entry. kv.Delete or kv.Purge of a key by
//     other means, the bucket's MaxAge, or deleting and recreating the
//     bucket removes it. A bucket deleted and created again also starts
//     its revisions over: a running Store's cached revision may then name
//     another entry, and a stale write land on it; make new Stores after
//     recreating a bucket, or use [WithoutRevisionCache].
//   - A replicated bucket (Replicas > 1) on nats-server 2.9 is not
//     fenced: the stream's leader checks a write's expected revision
//     against the writes it has applied, not those in flight, so writes
//     sent together on one revision all land. [Store.CheckRevisions]
//     fails on it with [ErrRevisionsIgnored]. Use a bucket of one replica
//     there.
//   - Reads may be stale in a cluster: a bucket with direct gets
//     (AllowDirect, which nats.go sets on the buckets it creates) may be
//     read from a replica that lags. Writes stay fenced (the stream's
//     leader checks the revision, and a write on a stale revision is
//     refused and read again), and so is [Store.GetForUpdate], which
//     writes back what it read; but [Store.Get] may return an older
//     value. Turn AllowDirect off where that matters.
//   - A server that ignores the expected revision (one too old to know
//     the header, or something in between that drops it) fences nothing:
//     [Store.CheckRevisions] detects it; run it once against a server you
//     have not checked. New does no I/O and does not run it.
//
// This package depends on github.com/nats-io/nats.go; package fence does
// not, and a program that does not import this package does not link it.
package jsfence
