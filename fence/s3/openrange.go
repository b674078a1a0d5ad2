package s3fence

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
)

// OpenRange is [Store.Open] for part of the value: length bytes from
// offset, both counted in the value (the envelope is not), or to the end if
// length is negative. The Reader's Size is what the range holds: fewer than
// length bytes near the end of the value, none from its end on.
//
// It reads the envelope header (a ranged GET), then the range with If-Match
// on the ETag just read, so that the bytes and the token come from one
// version of the object: if the object is replaced in between, it starts
// again, up to [WithMaxAttempts] times, and then fails with an error
// matching [ErrConflict]. Other errors are those of Open, and an error
// matching [ErrInvalidArgument], before any I/O, for a negative offset.
// ctx bounds both requests and the transfer, as for Open.
func (s *Store) OpenRange(ctx context.Context, key string, offset, length int64) (*Reader, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("%w: OpenRange: negative offset %d", ErrInvalidArgument, offset)
	}
	var lastErr error
	for range s.opts.maxAttempts {
		r, err := s.openRange(ctx, key, offset, length)
		if httpStatus(err) != http.StatusPreconditionFailed {
			return r, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w: s3://%s/%s: the object kept changing between the reads of its header and of the range: %w",
		ErrConflict, s.bucket, key, lastErr)
}

// openRange makes one attempt: a 412 error means the object changed after
// its header was read.
func (s *Store) openRange(ctx context.Context, key string, offset, length int64) (*Reader, error) {
	v, size, ok, err := s.readHeader(ctx, key)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%w: s3://%s/%s", fence.ErrNotFound, s.bucket, key)
	}
	s.remember(key, v.etag, v.hdr)
	if v.hdr.deleted {
		return nil, fmt.Errorf("%w: s3://%s/%s: deleted by Store.Delete with token %d", fence.ErrNotFound, s.bucket, key, v.hdr.token)
	}
	if offset > math.MaxInt64-HeaderSize {
		return &Reader{body: http.NoBody, token: v.hdr.token}, nil // past the end of any object
	}
	start := HeaderSize + offset
	if length > math.MaxInt64-start {
		length = -1 // to the end: no object is longer
	}
	if length == 0 || size >= 0 && start >= size {
		return &Reader{body: http.NoBody, token: v.hdr.token}, nil
	}
	rng := "bytes=" + strconv.FormatInt(start, 10) + "-"
	if length > 0 {
		rng += strconv.FormatInt(start+length-1, 10)
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng, IfMatch: &v.etag, ExpectedBucketOwner: s.owner()}
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := s.client.GetObject(ctx, in)
	switch {
	case err == nil:
		n := int64(-1)
		if out.ContentLength != nil {
			n = *out.ContentLength
		}
		return &Reader{body: out.Body, token: v.hdr.token, size: n}, nil
	case httpStatus(err) == http.StatusPreconditionFailed:
		return nil, err
	case httpStatus(err) == http.StatusRequestedRangeNotSatisfiable: // past the end of a value of unknown size
		return &Reader{body: http.NoBody, token: v.hdr.token}, nil
	case isNotFound(err):
		return nil, fmt.Errorf("%w: s3://%s/%s: %w", fence.ErrNotFound, s.bucket, key, err)
	}
	return nil, s.failure("get", key, err)
}
