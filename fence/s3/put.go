package s3fence

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// write is one Put call in progress.
type write struct {
	key string
	hdr header
	src *valueSource // the caller's value, sent behind hdr
	// in is the template of the write's PutObject requests: the caller's
	// options and the token's metadata.
	in *s3.PutObjectInput
	// mp is the write's multipart upload, or nil for one PutObject per
	// attempt.
	mp *upload
	// etag is the object's ETag once the write has landed, "" before (or
	// if the server sent none): Update's write after its claim is
	// conditional on it.
	etag string
}

// size is the length of the object the write puts: the envelope and the
// value.
func (w *write) size() int64 { return HeaderSize + w.src.size }

// body returns a request body for the object's bytes [start, start+n).
func (w *write) body(start, n int64) *objectReader { return newObjectReader(w.hdr, w.src, start, n) }

// Put writes value under key with token, unless the object already carries
// a higher token; see [fence.Store] for the contract and the package
// documentation for how. It returns nil once the write has landed, and
// otherwise an error matching one of:
//
//   - [fence.ErrStale] (a *[fence.StaleError] with Current set): the object
//     carries a higher token. Nothing was written.
//   - [ErrConflict]: other writers kept changing the object. Nothing was written.
//   - [fence.ErrUnknownOutcome] (a *[fence.UnknownOutcomeError] wrapping the
//     transport error): a PUT got no answer, or a 5xx other than 501 (503
//     SlowDown included), and reading the object back did not show it; it
//     may still land. Read before deciding.
//   - [ErrConditionalUnsupported]: the server does not honour conditional
//     writes: it answered 501 NotImplemented to the conditional PUT, or
//     failed [Store.CheckConditionalWrites], which a Store runs before its
//     first write. Nothing was written.
//   - [fence.ErrInvalidKey], [fence.ErrInvalidToken], ctx's error, or
//     [ErrInvalidArgument] for a nil ctx, before any I/O.
//   - [ErrNoSuchBucket], [ErrAccessDenied], [ErrForeignObject], or another
//     wrapped AWS SDK error: the server refused. Nothing was written.
//
// ctx bounds the reads Put makes, the waits between its attempts, and
// whether it starts a PUT; a PUT already under way when ctx ends gets the
// grace period of [WithPutGrace], whose documentation states the rule.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	return s.PutWith(ctx, key, token, value)
}

// PutWith is [Store.Put] with PutOptions for this write's PutObject
// requests (Content-Type, metadata, tags, storage class, server-side
// encryption, ...), applied after the Store's [WithPutDefaults]. An invalid
// option fails the call before any I/O. Results, errors and the role of ctx
// are those of Put.
func (s *Store) PutWith(ctx context.Context, key string, token fence.Token, value []byte, opts ...PutOption) error {
	return s.fencedWrite(ctx, key, header{token: token}, bytes.NewReader(value), opts)
}

// fencedWrite is every write of a Store: the checks before any I/O, the
// conditional-write check, the telemetry, and the read–decide–PUT loop,
// for value (from its current offset to its end) under h's token.
func (s *Store) fencedWrite(ctx context.Context, key string, h header, value io.ReadSeeker, opts []PutOption) error {
	if err := s.checkCall(ctx, key); err != nil {
		return err
	}
	op := s.tel.put
	if h.deleted {
		op = s.tel.delete
	}
	if err := h.token.Validate(); err != nil {
		return err
	}
	w, err := s.newWrite(key, h, value, opts)
	if err != nil {
		return err
	}
	if err := s.ensureConditional(ctx, w.mp != nil); err != nil {
		return err
	}
	ctx, tw := op.Start(ctx, h.token)
	if tw.Recording() {
		tw.SetResource(key)
	}
	err = s.put(ctx, w)
	if err != nil {
		s.abortUpload(ctx, w)
	}
	tw.End(err)
	return err
}

// newWrite prepares a write, refusing bad arguments before any I/O.
func (s *Store) newWrite(key string, h header, value io.ReadSeeker, opts []PutOption) (*write, error) {
	if nilcheck.IsNil(value) {
		return nil, fmt.Errorf("%w: nil value reader (%T)", ErrInvalidArgument, value)
	}
	src, err := newValueSource(value)
	if err != nil {
		return nil, err
	}
	in, err := s.putInput(h.token.String(), opts)
	if err != nil {
		return nil, err
	}
	h.id = newWriteID()
	w := &write{key: key, hdr: h, src: src, in: in}
	return w, s.planUpload(w)
}

// put runs the read–decide–PUT loop. A version from the cache is tried
// first; a refused PUT sends the loop back to a fresh read.
func (s *Store) put(ctx context.Context, w *write) error {
	v, exists := s.cache.get(w.key)
	known := exists && v.hdr.token <= w.hdr.token // a higher cached token is re-read, not trusted
	var lastErr error
	for attempt, contended := 0, 0; ; attempt++ {
		if !known {
			if attempt > 0 {
				s.tel.reread(ctx)
			}
			var err error
			if v, exists, err = s.current(ctx, w.key); err != nil {
				return err
			}
		}
		if done, err := s.decide(w, v, exists, attempt, lastErr); done {
			return err
		}
		refused, err := s.attempt(ctx, w, v, exists)
		if !refused {
			return err
		}
		if lastErr = err; !known {
			contended++ // a fresh read lost a race, not merely a stale cache entry
			if err := s.backoff(ctx, w.key, contended); err != nil {
				return err
			}
		}
		known = false
	}
}

// decide says whether the loop is over given the object's current version:
// our write is there, a higher token is, or the attempts are used up.
func (s *Store) decide(w *write, v version, exists bool, attempt int, lastErr error) (bool, error) {
	switch {
	case exists && v.hdr.id == w.hdr.id:
		// Our write landed (a client that retries by itself got a lost answer).
		w.landed(s, v.etag)
		return true, nil
	case exists && v.hdr.token > w.hdr.token:
		return true, s.stale(w.key, w.hdr.token, v)
	case attempt >= s.opts.maxAttempts:
		return true, fmt.Errorf("%w: s3://%s/%s, %d conditional PUTs refused: %w", ErrConflict, s.bucket, w.key, attempt, lastErr)
	}
	return false, nil
}

// stale is the refusal of a write with token to key, whose object is v,
// with a higher token; v is remembered.
func (s *Store) stale(key string, token fence.Token, v version) error {
	s.remember(key, v.etag, v.hdr)
	return &fence.StaleError{Resource: key, Token: token, Current: v.hdr.token}
}

// noRetries turns the SDK's retries off for one call. A retried PUT whose
// first attempt landed unseen would come back 412 and look refused; Put
// retries itself, after reading what is there.
func noRetries(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// attempt sends one conditional PUT based on v. refused reports that the
// server refused it because the object is no longer v (err is the refusal);
// otherwise err is Put's result.
func (s *Store) attempt(ctx context.Context, w *write, v version, exists bool) (refused bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err // nothing sent
	}
	if err := s.uploadParts(ctx, w); err != nil {
		return false, err // nothing visible was written
	}
	if err := ctx.Err(); err != nil {
		return false, err // ended while the parts went: the Complete is not started
	}
	err = s.conditionalPut(ctx, w, v, exists)
	if err == nil {
		return false, nil
	}
	if w.mp != nil && apiCode(err) == "NoSuchUpload" {
		return s.uploadGone(ctx, w, err)
	}
	switch classifyPut(err) {
	case putRefused:
		s.cache.drop(w.key)
		s.tel.conflict(ctx)
		return true, err
	case putUnknown:
		return false, s.reconcile(ctx, w, err)
	}
	return false, s.putFailure(w.key, err)
}

// conditionalPut sends w's write, valid only if the object is still v (or
// still absent), with the grace period of [WithPutGrace]: a PutObject, or
// the CompleteMultipartUpload of w's upload.
func (s *Store) conditionalPut(ctx context.Context, w *write, v version, exists bool) error {
	pctx, done := withGrace(ctx, s.opts.putGrace)
	defer done()
	send := s.putObject
	if w.mp != nil {
		send = s.completeUpload
	}
	etag, err := send(pctx, w, v, exists)
	if err != nil {
		return err
	}
	w.landed(s, etag)
	return nil
}

// landed records that w is the object now, with etag.
func (w *write) landed(s *Store, etag string) {
	w.etag = etag
	s.remember(w.key, etag, w.hdr)
}

// putObject sends w's object in one conditional PutObject.
func (s *Store) putObject(ctx context.Context, w *write, v version, exists bool) (etag string, err error) {
	in := *w.in
	in.Bucket, in.Key = &s.bucket, &w.key
	body := w.body(0, w.size())
	defer body.retire()
	in.Body, in.ContentLength = body, aws.Int64(w.size())
	in.IfMatch, in.IfNoneMatch = condition(v, exists)
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := s.client.PutObject(ctx, &in, noRetries)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// condition returns the If-Match and If-None-Match of a write based on v:
// valid only if the object is still v, or still absent.
func condition(v version, exists bool) (ifMatch, ifNoneMatch *string) {
	if exists {
		return aws.String(v.etag), nil
	}
	return nil, aws.String("*")
}

// reconcile decides a PUT that got no answer by reading the object back:
// if it carries this write's ID the PUT landed. Otherwise the PUT may still
// be in flight, and the outcome is unknown. Without a live ctx there is no
// read back.
func (s *Store) reconcile(ctx context.Context, w *write, putErr error) error {
	s.cache.drop(w.key)
	if ctx.Err() == nil {
		if v, exists, err := s.current(ctx, w.key); err == nil && exists && v.hdr.id == w.hdr.id {
			w.landed(s, v.etag)
			return nil
		}
	}
	return &fence.UnknownOutcomeError{Resource: w.key, Token: w.hdr.token, Err: putErr}
}

// backoff waits a random time up to retryDelay·2^(n-1), capped at
// 64·retryDelay, before the retry after the nth lost race.
func (s *Store) backoff(ctx context.Context, key string, n int) error {
	var d time.Duration
	if s.opts.retryDelay > 0 {
		d = rand.N(s.opts.retryDelay<<min(n-1, 6)) + 1
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("s3fence: put s3://%s/%s: waiting to retry after a conflict: %w", s.bucket, key, ctx.Err())
	case <-t.C:
		return nil
	}
}
