package s3fence

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
)

// headerRange asks for the envelope header only.
var headerRange = "bytes=0-" + strconv.Itoa(HeaderSize-1)

// Get returns the value and token of the object under key, with the
// envelope stripped, or an error matching [fence.ErrNotFound] when there is
// no object or it was deleted by [Store.Delete], [ErrForeignObject] when the object was not written by a Store,
// and [ErrNoSuchBucket] or [ErrAccessDenied] as their names say. The version
// read is remembered, so a following [Store.Put] to key may skip its read.
//
// ctx bounds the request, the body's transfer included; a nil ctx is an
// error, not a panic. Get changes nothing.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if isNotFound(err) {
			return fence.Record{}, fmt.Errorf("%w: s3://%s/%s: %w", fence.ErrNotFound, s.bucket, key, err)
		}
		return fence.Record{}, s.failure("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return fence.Record{}, s.failure("get", key, err)
	}
	h, err := decodeHeader(b)
	if err != nil {
		return fence.Record{}, s.failure("get", key, err)
	}
	s.remember(key, aws.ToString(out.ETag), h)
	if h.deleted {
		return fence.Record{}, fmt.Errorf("%w: s3://%s/%s: deleted by Store.Delete with token %d", fence.ErrNotFound, s.bucket, key, h.token)
	}
	return fence.Record{Value: b[HeaderSize:], Token: h.token}, nil
}

// current reads the ETag and envelope header of the object under key with a
// ranged GET, so the value itself is not transferred. ok is false when there
// is no object.
func (s *Store) current(ctx context.Context, key string) (v version, ok bool, err error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &headerRange})
	switch {
	case err == nil:
	case isNotFound(err):
		return version{}, false, nil
	case httpStatus(err) == http.StatusRequestedRangeNotSatisfiable: // an empty object
		return version{}, false, s.failure("read", key, fmt.Errorf("%w: %w", ErrForeignObject, err))
	default:
		return version{}, false, s.failure("read", key, err)
	}
	defer drainAndClose(out.Body)
	var b [HeaderSize]byte
	n, err := io.ReadFull(out.Body, b[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return version{}, false, s.failure("read", key, err)
	}
	if v.hdr, err = decodeHeader(b[:n]); err != nil {
		return version{}, false, s.failure("read", key, err)
	}
	if v.etag = aws.ToString(out.ETag); v.etag == "" {
		return version{}, false, s.failure("read", key, fmt.Errorf("response has no ETag, so no conditional write can follow"))
	}
	return v, true, nil
}

// remember caches the version just read or written, if it has an ETag.
func (s *Store) remember(key, etag string, h header) {
	if etag == "" {
		s.cache.drop(key)
		return
	}
	s.cache.put(key, version{etag: etag, hdr: h})
}

// drainAndClose reads a small body to its end before closing it, so the
// connection goes back to the pool instead of being torn down.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}
