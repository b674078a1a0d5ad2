// Package gcsfence makes Google Cloud Storage objects a fenced resource: a
// [Store] refuses a write carrying a lower fencing token than the object
// holds, with Cloud Storage's own precondition, ifGenerationMatch.
//
// The import path is github.com/fencelock/fencelock/fence/gcs; the
// package is named gcsfence so that it does not read as the client's.
//
//	client, err := storage.NewClient(ctx) // cloud.google.com/go/storage
//	store, err := gcsfence.New(client, "my-bucket", gcsfence.WithPrefix("fences/"))
//	g, err := fence.NewGuard(lock) // lock is an *etcdlock.Lock
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
// Resource key K is the object prefix+K ([WithPrefix]). Its bytes begin
// with a header of [HeaderSize] bytes: the magic "fencegcs", a flags byte
// (a record follows, or none: deleted, or claimed before any value), the
// token, 8 bytes big-endian, and a random id of the write; the value
// follows. The token is in the
// bytes, so the generation precondition covers it (a metadata update
// changes the metageneration, not the generation, and cannot move it).
// The metadata key fencelock-token repeats it for people; nothing trusts
// it.
//
// # How a write is fenced
//
// A write knows the object's generation and header (from this Store's last
// write or read of the key, or from reading the header), refuses a higher
// token, and writes with ifGenerationMatch on that generation (or
// ifGenerationMatch=0, "does not exist"). If anything was written in
// between, Cloud Storage refuses it (412), and the write reads the object
// and decides again, up to [fence.UpdateAttempts] times. Generations never
// repeat, so, unlike S3's content ETags, a write cannot land on an object
// that changed and changed back. A write arriving late finds its
// generation gone, and then the newer token.
//
// Each write is one request (ChunkSize 0: no resumable upload) with a
// CRC32C the server checks, sent once, with the library's retries off for
// it: a resent copy of a write that landed would be refused by its own
// generation, read the newer object, and say stale of a write that
// landed. So a lost reply (no answer, or a 5xx) gives
// [fence.ErrUnknownOutcome]; a 4xx is a refusal ([ErrNoBucket] for a
// bucket that does not exist).
//
// # Reading before you write
//
// [Store.GetForUpdate] reads the object and, unless it holds the token
// already, writes it back with the token on the generation read: the
// claim; an older holder's late write is refused from then on. It writes
// the value again, so claim a large object once. [Store.Update] claims,
// calls your function, and writes its result on the claim's generation.
//
// # Compatible servers
//
// The tests run against fake-gcs-server through the real client (which
// needs storage.WithJSONReads() for it). [Store.CheckPreconditions] checks
// that a server refuses a write whose ifGenerationMatch does not hold; run
// it once against anything that is not Google's.
//
// This package depends on cloud.google.com/go/storage; package fence does
// not, and a program that does not import this package does not link it.
package gcsfence
