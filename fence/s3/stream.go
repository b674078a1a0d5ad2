package s3fence

import (
	"context"
	"io"

	"github.com/fencelock/fencelock/fence"
)

// PutReader is [Store.PutWith] for a value read from value, from its
// current offset to its end, as the request is sent: the envelope header is
// sent first and the value streamed behind it, never copied, so the memory
// a write uses does not grow with the value (the AWS SDK reads the body
// once more to sign it over plain HTTP, and to checksum it, without holding
// it).
//
// value must be an io.ReadSeeker (an *os.File, an *io.SectionReader, a
// *bytes.Reader) because a write may send it more than once: after a
// refused conditional PUT (another writer got in between) Put reads the
// object again and, unless it is now stale, sends the value again; the SDK
// rewinds a body to sign it and to retry a part. A value that can be read
// only once cannot be fenced without being held whole somewhere: buffer it
// to a temporary file first. The value must not change, nor be read or
// moved by anyone else, until PutReader returns; PutReader leaves its offset
// unspecified and does not touch it once it has returned.
//
// An object (value and envelope) up to [WithMultipartThreshold], by default
// 5 GiB, is written with one conditional PutObject. A larger one, up to
// S3's 5 TiB, is written as a fenced multipart upload: the parts
// ([WithPartSize]) are sent once, the envelope header in the first, and
// CompleteMultipartUpload carries the If-Match or If-None-Match a PutObject
// would; the object appears, whole, only then. A refused Complete is
// decided like a refused PUT, and retried without sending the parts again.
// Multipart writes need a [MultipartClient] and a server that honours the
// conditions on CompleteMultipartUpload, which a Store checks before its
// first multipart write ([Store.CheckMultipartConditionalWrites]). When the
// write fails, whatever the error, the upload is aborted.
//
// Results and errors are those of [Store.Put], plus an error matching
// [ErrInvalidArgument], before any I/O, for a nil or unseekable value, or
// an object that needs a multipart upload with a client that cannot make
// one. ctx bounds the write as for Put; the grace period of [WithPutGrace]
// covers the conditional request only (the PutObject, or the
// CompleteMultipartUpload), not the parts before it.
func (s *Store) PutReader(ctx context.Context, key string, token fence.Token, value io.ReadSeeker, opts ...PutOption) error {
	return s.fencedWrite(ctx, key, header{token: token}, value, opts)
}
