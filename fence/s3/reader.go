package s3fence

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
)

// Reader streams the value of one version of an object, opened by
// [Store.Open], with its envelope already read and checked. It is not safe
// for concurrent use; Close it when done.
type Reader struct {
	body  io.ReadCloser
	token fence.Token
	size  int64
	meta  objectMeta // what a claim's rewrite keeps (Store.GetForUpdate)
}

// Open starts reading the object under key and returns its value as a
// stream, with the envelope stripped: for values too large to hold whole.
// Errors are those of [Store.Get], and the version read is remembered in the
// same way.
//
// ctx bounds the request and the whole transfer of the body: once it ends,
// reads fail with its error. The Reader holds a connection until it is
// closed.
func (s *Store) Open(ctx context.Context, key string) (*Reader, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	r, v, err := s.open(ctx, key)
	if err != nil {
		return nil, err
	}
	if v.hdr.deleted {
		r.Close()
		return nil, fmt.Errorf("%w: s3://%s/%s: deleted by Store.Delete with token %d", fence.ErrNotFound, s.bucket, key, v.hdr.token)
	}
	return r, nil
}

// open GETs the whole object under key, checks its envelope and remembers
// the version read. It returns a Reader of the value (of nothing, for a
// tombstone) and the version, or, when there is no object, a nil Reader
// and an error matching [fence.ErrNotFound].
func (s *Store) open(ctx context.Context, key string) (*Reader, version, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, ExpectedBucketOwner: s.owner()}
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isNotFound(err) {
			return nil, version{}, fmt.Errorf("%w: s3://%s/%s: %w", fence.ErrNotFound, s.bucket, key, err)
		}
		return nil, version{}, s.failure("get", key, err)
	}
	var b [HeaderSize]byte
	n, err := io.ReadFull(out.Body, b[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		out.Body.Close()
		return nil, version{}, s.failure("get", key, err)
	}
	v := version{etag: aws.ToString(out.ETag)}
	if v.hdr, err = decodeHeader(b[:n]); err != nil {
		out.Body.Close()
		return nil, version{}, s.failure("get", key, err)
	}
	s.remember(key, v.etag, v.hdr)
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength - HeaderSize
	}
	return &Reader{body: out.Body, token: v.hdr.token, size: size, meta: objectMeta{out.ContentType, out.Metadata}}, v, nil
}

// Token returns the token the object was written with.
func (r *Reader) Token() fence.Token { return r.token }

// Size returns the value's length in bytes (the object's, less the
// envelope), or -1 if the server did not say.
func (r *Reader) Size() int64 { return r.size }

// Read reads the value, after the envelope. On a nil or zero Reader (one
// Open did not return, as after an ignored error) it fails with an error
// matching [ErrInvalidArgument], as os.File's Read does on a nil File.
func (r *Reader) Read(p []byte) (int, error) {
	if err := r.usable("Read"); err != nil {
		return 0, err
	}
	return r.body.Read(p)
}

// Close releases the connection. On a nil or zero Reader it fails with an
// error matching [ErrInvalidArgument], so that a deferred Close of a
// failed Open's result does not panic.
func (r *Reader) Close() error {
	if err := r.usable("Close"); err != nil {
		return err
	}
	return r.body.Close()
}

// usable refuses a nil or zero Reader, which would otherwise panic.
func (r *Reader) usable(op string) error {
	if r == nil || r.body == nil {
		return fmt.Errorf("%w: %s on a nil or zero Reader", ErrInvalidArgument, op)
	}
	return nil
}
