// Package azblobfence makes Azure Blob Storage block blobs a fenced
// resource: a [Store] refuses a write carrying a lower fencing token than
// the blob holds, with Azure's own conditional write, If-Match on the
// blob's ETag (If-None-Match: * for the first write).
//
// The import path is github.com/fencelock/fencelock/fence/azblob; the
// package is named azblobfence so that it does not read as the SDK's
// azblob.
//
//	// c is a *container.Client (github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container)
//	store, err := azblobfence.New(c, azblobfence.WithPrefix("fences/"))
//	g, err := fence.NewGuard(lock) // lock is an *etcdlock.Lock
//	err = g.Put(ctx, store, "scheduler/state", data)
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing was written.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// No answer; read back with store.Get before deciding.
//	}
//
// # Layout: the token in the metadata
//
// Resource key K is the block blob prefix+K ([WithPrefix]). Its bytes are
// the value, as the caller gave them; its metadata holds the token
// ([MetadataToken], in decimal), the id of the write ([MetadataWrite],
// random, one per write) and whether the blob holds a record or only a
// floor ([MetadataKind]: "value", or "floor" for a blob left by
// [Store.Delete] or by a claim of a key with no value).
//
// The token can live in the metadata because Azure gives a blob a new
// ETag on every write, a metadata-only one (Set Blob Metadata) included:
// If-Match on the ETag covers the metadata as it covers the bytes.
// fence/s3 had to put its token in the bytes (S3's ETag is the MD5 of the
// content, so a rewrite of the same bytes would keep it), and fence/gcs
// too (a metadata update changes an object's metageneration, not the
// generation its precondition names). Here the blob's bytes stay the
// value: the az CLI, a SAS URL, Data Factory or anything else that reads
// the blob reads the value, with no header to strip, and reading a blob's
// token and ETag is a HEAD (Get Blob Properties), with none of the value.
// A blob without the metadata is refused ([ErrForeignBlob]), and Put will
// not overwrite it; a tool that replaces a blob's metadata (Set Blob
// Metadata without the fencelock keys) makes it foreign.
//
// # How a write is fenced
//
// [Store.Put] reads the blob's properties (or takes the ETag this Store
// saw at its last write or read of the key), refuses a higher token with
// a *[fence.StaleError], and sends Put Blob with If-Match on that ETag
// (If-None-Match: * when there is no blob). If anything was written in
// between, Azure refuses it (412 ConditionNotMet, 409 BlobAlreadyExists),
// and Put reads again and decides again, up to [fence.UpdateAttempts]
// times. A write arriving late finds its ETag gone, and then the newer
// token. Azure gives every write a new ETag, so a write cannot land on a
// blob that changed and changed back (Azurite's ETags can repeat within a
// millisecond: see docs/azblob.md).
//
// Each write is one request, sent once: the SDK's retries are off for it
// (policy.WithRetryOptions with MaxRetries -1, on the write's context
// only). A resent copy of a write that landed would be refused by the
// write's own new ETag; the Store, reading again, would find a newer
// holder's write landed in between and say stale of a write that landed.
// So a write that gets no answer (or a 5xx) is decided by reading the
// blob back: if the blob carries the write's id, it landed; otherwise the
// error matches [fence.ErrUnknownOutcome]. A refused write is checked the
// same way: when something in between delivered it twice, the first copy
// landed and the second was refused by it, and the id in the blob says
// the write is done ([Store.Update] does not call its function again).
//
// # Reading before you write
//
// [Store.GetForUpdate] reads the blob and, unless it holds the token
// already, writes it back with the token on the ETag read: the claim; an
// older holder's late write is refused from then on. It writes the value
// again, so claim a large blob once. [Store.Update] claims, calls your
// function, and writes its result on the claim's ETag.
//
// There is no UpdateAll ([fence.AllUpdater]): Azure Blob Storage has no
// write of several blobs all or none (a blob batch is not atomic).
//
// # Compatible servers
//
// The tests run against Azurite, Microsoft's emulator, through the real
// SDK. A server, or a proxy in front of it, that ignores If-Match would
// let a paused holder's late write land over a newer one, so before its
// first write a Store checks ([Store.CheckConditionalWrites], on the blob
// [ProbeKey]) and refuses to write, with [ErrConditionalUnsupported],
// unless the server refuses two writes whose conditions do not hold.
// [WithConditionalCheck] turns the check off.
//
// The credentials need to read, create and write blobs (a SAS with r, c
// and w; a role with Storage Blob Data Contributor). Bad arguments (a nil
// client or context, an empty key, a key with a backslash, which Azure
// stores as a slash, a key ending in a slash or with a path segment
// ending in a dot, which Azure's naming rules say to avoid, a token that
// is not positive) are refused before any I/O, never with a panic.
//
// This package depends on github.com/Azure/azure-sdk-for-go/sdk/storage/azblob
// (its blob and blockblob packages: a Store takes any [Container], so
// that it does not link the container package's Apache Arrow itself);
// package fence does not, and a program that does not import this package
// does not link it.
package azblobfence
