package s3fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
)

// headerRange asks for the envelope header only.
var headerRange = "bytes=0-" + strconv.Itoa(HeaderSize-1)

// Get returns the value and token of the object under key, with the
// envelope stripped, or an error matching [fence.ErrNotFound] when there is
// no object or it was deleted by [Store.Delete], [ErrForeignObject] when the
// object was not written by a Store, and [ErrNoSuchBucket] or
// [ErrAccessDenied] as their names say. The version read is remembered, so a
// following [Store.Put] to key may skip its read. For large values,
// [Store.Open] streams the value instead of holding it whole.
//
// ctx bounds the request, the body's transfer included; a nil ctx is an
// error ([ErrInvalidArgument]). Get changes nothing.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	r, err := s.Open(ctx, key)
	if err != nil {
		return fence.Record{}, err
	}
	defer r.Close()
	v, err := readValue(r)
	if err != nil {
		return fence.Record{}, s.failure("get", key, err)
	}
	return fence.Record{Value: v, Token: r.token}, nil
}

// readValue reads r to its end, in one allocation when its size is known.
func readValue(r *Reader) ([]byte, error) {
	if r.size < 0 {
		return io.ReadAll(r)
	}
	v := make([]byte, r.size)
	if _, err := io.ReadFull(r, v); err != nil {
		return nil, err
	}
	return v, nil
}

// errNoETag is a read's failure when the response carries no ETag.
var errNoETag = errors.New("response has no ETag, so no conditional write can follow")

// current reads the ETag and envelope header of the object under key with a
// ranged GET, so the value itself is not transferred. ok is false when there
// is no object.
func (s *Store) current(ctx context.Context, key string) (v version, ok bool, err error) {
	v, _, ok, err = s.readHeader(ctx, key)
	return v, ok, err
}

// readHeader is current, and also returns the object's size from the
// response's Content-Range (-1 if it has none).
func (s *Store) readHeader(ctx context.Context, key string) (v version, size int64, ok bool, err error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &headerRange, ExpectedBucketOwner: s.owner()}
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := s.client.GetObject(ctx, in)
	switch {
	case err == nil:
	case isNotFound(err):
		return version{}, 0, false, nil
	case httpStatus(err) == http.StatusRequestedRangeNotSatisfiable: // an empty object
		return version{}, 0, false, s.failure("read", key, fmt.Errorf("%w: %w", ErrForeignObject, err))
	default:
		return version{}, 0, false, s.failure("read", key, err)
	}
	defer drainAndClose(out.Body)
	var b [HeaderSize]byte
	n, err := io.ReadFull(out.Body, b[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return version{}, 0, false, s.failure("read", key, err)
	}
	if v.hdr, err = decodeHeader(b[:n]); err != nil {
		return version{}, 0, false, s.failure("read", key, err)
	}
	if v.etag = aws.ToString(out.ETag); v.etag == "" {
		return version{}, 0, false, s.failure("read", key, errNoETag)
	}
	return v, objectSize(out.ContentRange), true, nil
}

// remember caches the version just read or written, if it has an ETag.
func (s *Store) remember(key, etag string, h header) {
	if etag == "" {
		s.cache.drop(key)
		return
	}
	s.cache.put(key, version{etag: etag, hdr: h})
}

// objectSize returns the total of a Content-Range ("bytes 0-31/1234"), or
// -1.
func objectSize(contentRange *string) int64 {
	_, total, ok := strings.Cut(aws.ToString(contentRange), "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return -1
	}
	return n
}

// drainAndClose reads a small body to its end before closing it, so the
// connection goes back to the pool instead of being torn down.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// owner is the expected bucket owner to send with a request, or nil.
func (s *Store) owner() *string { return s.opts.bucketOwner }
