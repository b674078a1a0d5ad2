// Package s3fence makes objects in Amazon S3, or any S3-compatible store with
// conditional writes, a fenced resource: a [Store] refuses a write carrying a
// lower fencing token than the object already holds, and the S3 server, not
// the writer, has the last word.
//
// The import path is github.com/fencelock/fencelock/fence/s3; the package is
// named s3fence so that it does not shadow the AWS SDK's s3 package.
//
//	client := s3.NewFromConfig(cfg) // github.com/aws/aws-sdk-go-v2/service/s3
//	store, err := s3fence.New(client, "invoices")
//	if err != nil {
//		return err
//	}
//	g, err := fence.NewGuard(lock) // lock is an *etcdlock.Lock
//	if err != nil {
//		return err
//	}
//	err = g.Put(ctx, store, "invoice-42.json", data)
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing was written.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// No answer; read back with store.Get before deciding.
//	}
//
// # How a write is fenced
//
// [Store.Put] reads the object's ETag and token, refuses with a
// *[fence.StaleError] if the token is higher than the writer's, and otherwise
// sends PutObject with If-Match: <that ETag> (If-None-Match: * when there is
// no object). The server applies the PUT only if nobody wrote in between;
// when someone did (412 PreconditionFailed, or 409 ConditionalRequestConflict
// for a concurrent conditional write), Put reads again and decides again, up
// to [WithMaxAttempts] PUTs. The read fetches only the envelope header (a
// ranged GET). A Store remembers the ETag and token of the last version it
// wrote or read for each key ([WithCacheSize]), so a holder writing the same
// key again sends a single conditional PUT, and reads only if that is refused.
//
// A PUT that gets no answer (a timeout, a reset connection) or a 5xx may have
// landed. Put reads the object back: if it holds this write, Put returns nil;
// otherwise the outcome is unknown and Put says so with
// [fence.ErrUnknownOutcome], never with [fence.ErrStale]. Every 5xx counts,
// 503 SlowDown included: S3 sends it to throttle requests, but a load
// balancer or gateway in front of an S3-compatible server can send a 502, 503
// or 504 after the request reached the storage, and the client cannot tell
// them apart. The exception is 501 NotImplemented, which says the server
// does not implement the request (the conditional headers): nothing was
// written, and Put returns [ErrConditionalUnsupported]. A PUT under way
// when the caller's context ends is given a grace period ([WithPutGrace]
// states the rule).
//
// # The envelope, and why
//
// The ETag of a single-part upload is the MD5 of its bytes: it names content,
// not a write. Were the token kept only in metadata, a newer holder rewriting
// byte-identical content would leave the ETag unchanged, and a paused old
// holder's If-Match would still match: its stale write would land. So the
// token goes into the bytes the ETag covers. Every object a Store writes is
// the caller's value behind a [HeaderSize]-byte header:
//
//	offset  size  contents
//	0       7     magic "fencelk"
//	7       1     format version 1, and kind: 1 = a value, 2 = a tombstone
//	              left by [Store.Delete] (no value follows)
//	8       8     token, big-endian signed 64-bit, > 0
//	16      16    write ID: random, one per Put call
//	32      n     the caller's value
//
// The write ID makes every write's ETag unique, even the same holder's
// byte-identical rewrites, and lets a Put recognise its own write when it
// reads back after a lost answer. [Store.Get] and [Decode] strip the header;
// the token is also stored as user metadata [MetadataToken]
// (x-amz-meta-fence-token) for tools, but the header is what counts. Objects
// without the header are refused with [ErrForeignObject].
//
// # Reading objects without this package
//
// Anything that fetches the object's bytes itself sees the envelope: the AWS
// CLI (aws s3 cp), presigned URLs, CloudFront, Athena and other query
// engines, replication targets read by other tools. Strip the 32-byte header
// before use; from a shell, tail(1) counts bytes from 1, so
//
//	aws s3 cp s3://invoices/invoice-42.json - | tail -c +33
//
// prints the value, and the token is the user metadata fence-token
// (aws s3api head-object --query 'Metadata."fence-token"'), or bytes 8–15
// read big-endian. Check byte 7 first: 2 marks a tombstone, which has no
// value. In Go, use [Decode].
//
// # Deleting
//
// The floor is the object: a plain DeleteObject (aws s3 rm, a lifecycle
// expiration rule) removes it, and the next Put lands whatever its token, as
// on a new key. [Store.Delete] instead writes a tombstone, fenced like a Put,
// that keeps the token: Get reports the key as [fence.ErrNotFound], a stale
// Put is refused, and a Put with a token at least as high writes the key
// again. Keep expiration rules off the prefixes of fenced keys.
//
// # Reading before you write
//
// Fencing writes is not enough when a write depends on a read. A newer
// holder that reads with [Store.Get], while a paused older holder's write
// is still on its way, can have that write land after its read (nothing
// higher is there yet to refuse it), and then write back what it computed
// from the read: the older holder's acknowledged write is gone, with no
// error on either side. So read what you will write back with
// [Store.GetForUpdate], which claims the key for your token as it reads:
// from then on a write with a lower token is refused with [fence.ErrStale].
// Or do the read, the change and the write in one call with [Store.Update]:
//
//	rec, err := g.GetForUpdate(ctx, store, "invoice-42.json") // g is a *fence.Guard
//	if err != nil && !errors.Is(err, fence.ErrNotFound) {
//		return err
//	}
//	// ... decide from rec.Value, then write with g.Put.
//
//	err = g.Update(ctx, store, "counter", func(old fence.Record) ([]byte, error) {
//		n, err := strconv.Atoi(cmp.Or(string(old.Value), "0")) // no value yet: the zero Record
//		return strconv.AppendInt(nil, int64(n+1), 10), err // an error writes nothing
//	})
//
// The token is in the object's bytes, so a claim rewrites the object with
// the new token (conditional on the ETag read, with its value, Content-Type
// and user metadata), or writes a tombstone for a key with no value: one
// PUT of the whole object, the first time a holder reads the key. Update
// claims the key first too, then writes fn's value with If-Match on the
// claim's ETag; if the object changed in between, it reads again, and
// refuses with [fence.ErrStale] if a newer holder wrote, or calls fn again
// (a writer with the same token), up to [fence.UpdateAttempts] times.
// Once claimed, an Update is one GET and one conditional PUT, as the read
// and write it replaces. Keep Get for reads no write of yours depends on.
//
// # Object settings and large values
//
// [Store.PutWith] takes [PutOption]s for the PutObject requests of one
// write: [WithContentType], [WithMetadata], [WithTagging],
// [WithStorageClass], [WithServerSideEncryption] (SSE-S3, SSE-KMS) and, for
// any other field, [WithPutInput]; [WithPutDefaults] sets them for every
// write of a Store, and [WithExpectedBucketOwner] guards every request.
// [WithSSECustomerKey] encrypts with a key of the caller's (SSE-C) and
// sends it with every request that reads or writes object data.
//
// [Store.PutReader] streams a value from an io.ReadSeeker: the envelope
// header is sent before the value, which is never copied, so a write's
// memory does not grow with the value. It must be seekable because a
// refused conditional write is sent again. An object above
// [WithMultipartThreshold] (by default 5 GiB, the most one PutObject takes)
// is written as a fenced multipart upload: the parts ([WithPartSize]) first,
// the envelope header in the first part, then a CompleteMultipartUpload
// carrying the If-Match or If-None-Match a PutObject would. Nothing is
// visible until the Complete, which the server applies only under its
// condition; a failed write aborts its upload. This needs a
// [MultipartClient] and a server that honours the conditions on
// CompleteMultipartUpload ([Store.CheckMultipartConditionalWrites], run
// before a Store's first multipart write). A multipart object's ETag is
// not an MD5 of its bytes, which does not matter: the write ID in the
// envelope makes every write's ETag new.
//
// [Store.Open] streams a value instead of holding it whole, and
// [Store.OpenRange] reads part of it, the token and the bytes from one
// version (the range is read with If-Match on the ETag of the header just
// read). Reads take the Store's [WithExpectedBucketOwner] and
// [WithSSECustomerKey]. The SDK already validates response checksums when
// the object has them. There is no way to read an older version (VersionId):
// the fenced record is the current version; read old versions with
// GetObject and [Decode].
//
// # Requirements, and the check before the first write
//
// The server must honour If-Match and If-None-Match on PutObject, as AWS S3
// does since 2024 and versitygw, MinIO and others do. A server, or a proxy in
// front of it, that ignores them would let a paused holder's late write land
// over a newer one, and several S3-compatible servers have shipped that way.
// So before its first write a Store checks ([Store.CheckConditionalWrites]):
// on a probe object ([DefaultProbeKey], or [WithProbeKey]) it sends a PUT
// with If-None-Match: * and one with an If-Match that cannot match, and
// refuses to write, with [ErrConditionalUnsupported], unless the server
// refuses both (412, or 404 for the If-Match). [WithConditionalCheck] turns
// the automatic check off.
//
// The credentials need s3:GetObject and s3:PutObject (on the probe key too),
// and s3:ListBucket so that a missing key reads as 404 rather than 403.
//
// Fencing binds only writers that use a Store. On AWS, a bucket policy can
// make the condition mandatory for everyone: a statement that denies
// s3:PutObject when both condition keys s3:if-match and s3:if-none-match are
// absent (the Null condition operator, "true" for both) refuses every
// unconditional PutObject and CompleteMultipartUpload, so a tool or a
// misconfigured service cannot overwrite a fenced object blindly. (A writer
// that sends its own conditions can still replace an object it has read; and
// multipart uploads need the s3:ObjectCreationOperation key to exempt their
// other steps: see AWS's "Enforce conditional writes on Amazon S3 buckets".)
// Multipart writes also need s3:AbortMultipartUpload; a lifecycle rule
// with AbortIncompleteMultipartUpload removes the parts of uploads whose
// abort did not get through.
//
// A nil context or client (a typed nil *s3.Client too) gives an error
// matching [ErrInvalidArgument], never a panic, before any I/O.
//
// This package depends on the AWS SDK for Go v2 and smithy-go; package fence
// does not.
//
// # Telemetry
//
// Every Put, PutWith, Delete, GetForUpdate and Update is a span (s3.put,
// s3.delete, s3.get_for_update, s3.update: a child of the caller's context,
// with the token) and is counted in fencelock.writes and
// fencelock.write.duration by operation and outcome; refused
// conditional PUTs and the reads after them are counted in
// fencelock.s3.conflicts and fencelock.s3.rereads. See [WithMeterProvider]
// and [WithTracerProvider].
package s3fence
