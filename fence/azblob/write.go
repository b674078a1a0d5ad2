package azblobfence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/fencelock/fencelock/fence"
)

// result is what an upload's error says about the write: the one rule for
// when an outcome is unknown.
type result int

const (
	// putLanded: the server stored the blob.
	putLanded result = iota
	// putRefused: the condition did not hold (412 ConditionNotMet, 409
	// BlobAlreadyExists for If-None-Match: *, 404 BlobNotFound for
	// If-Match on a blob that is gone). Nothing was written: read again
	// and decide.
	putRefused
	// putUnknown: no answer (a lost reply, a cut connection, the context
	// ended while the request was out), or a 5xx, which a gateway may
	// send after the request reached the storage. It may have landed.
	putUnknown
	// putFailed: the server answered with another error, or the request
	// never left (a refused dial). Nothing was written.
	putFailed
)

// classify is the rule.
func classify(err error) result {
	var re *azcore.ResponseError
	var op *net.OpError
	switch {
	case err == nil:
		return putLanded
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists, bloberror.BlobNotFound):
		return putRefused
	case errors.As(err, &re) && re.StatusCode >= http.StatusInternalServerError:
		return putUnknown
	case re != nil:
		return putFailed
	case errors.As(err, &op) && op.Op == "dial":
		return putFailed
	}
	return putUnknown
}

// upload sends w's blob in one Put Blob, valid only if the blob is still
// base (If-Match on its ETag), or still absent (If-None-Match: *). The
// SDK's retries are off for it: a resent copy of a write that landed is
// refused by the write's own new ETag, and would send the Store back to
// read, where a newer holder's write, landed in between, would make it
// say stale of a write that landed.
func (s *Store) upload(ctx context.Context, key string, w version, value []byte, base version) (azcore.ETag, error) {
	cond := &blob.ModifiedAccessConditions{}
	if base.exists() {
		cond.IfMatch = &base.etag
	} else {
		cond.IfNoneMatch = ptrETag(azcore.ETagAny)
	}
	if !resendForTest.Load() {
		ctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	}
	r, err := s.blob(key).Upload(ctx, streaming.NopCloser(bytes.NewReader(value)), &blockblob.UploadOptions{
		Metadata:         w.metadata(),
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: ptr("application/octet-stream")},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	})
	if err != nil {
		return "", err
	}
	if r.ETag == nil {
		return "", nil
	}
	return *r.ETag, nil
}

func ptrETag(e azcore.ETag) *azcore.ETag { return &e }

// attempt sends w's write based on base, and decides it: refused reports
// that the blob changed since base (err is the refusal); otherwise err is
// the write's result, and w's ETag is set once it landed.
func (s *Store) attempt(ctx context.Context, key string, w *version, value []byte, base version) (refused bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err // nothing sent
	}
	etag, err := s.upload(ctx, key, *w, value, base)
	switch classify(err) {
	case putLanded:
		w.etag = etag
		s.cache.put(key, *w) // without an ETag, dropped
		return false, nil
	case putRefused:
		s.cache.drop(key)
		return true, err
	case putUnknown:
		return false, s.reconcile(ctx, key, w, err)
	}
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return false, fmt.Errorf("%w: %s: %w", ErrNoContainer, s.name, err)
	}
	return false, fmt.Errorf("azblobfence: writing %s: refused, nothing written: %w", s.Blob(key), err)
}

// reconcile decides a write that got no answer by reading the blob back:
// if it carries w's id, the write landed. Otherwise it may still land, or
// may have landed and been overwritten since: the outcome is unknown.
// Without a live ctx there is no read back.
func (s *Store) reconcile(ctx context.Context, key string, w *version, cause error) error {
	s.cache.drop(key)
	if ctx.Err() == nil {
		if v, err := s.head(ctx, key); err == nil && v.exists() && v.id == w.id {
			w.etag = v.etag
			return nil
		}
	}
	return &fence.UnknownOutcomeError{Resource: key, Token: w.token, Err: cause}
}

// resendForTest keeps the SDK's retries for uploads, for the control of
// the test that shows why they are off.
var resendForTest atomic.Bool

// retryDelay is the base of the wait after a write lost a race.
const retryDelay = 5 * time.Millisecond

// backoff waits a random time up to retryDelay·2^(n-1), capped at
// 64·retryDelay, after the nth lost race, so that writers racing for one
// blob spread out rather than lose together again.
func backoff(ctx context.Context, key string, n int) error {
	d := rand.N(retryDelay<<min(n-1, 6)) + 1
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("azblobfence: %q: waiting to retry after a conflict: %w", key, ctx.Err())
	case <-t.C:
		return nil
	}
}
