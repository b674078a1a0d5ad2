package s3fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultProbeKey is the key of the object [Store.CheckConditionalWrites]
// writes, unless [WithProbeKey] names another. The object holds a line of
// text saying what it is; it is not a fenced record and may be deleted.
const DefaultProbeKey = "fencelock-probe/conditional-writes"

// probeBody is what the probe object holds.
var probeBody = []byte("fencelock: conditional-write probe (see s3fence.Store.CheckConditionalWrites); safe to delete\n")

// neverMatches is an ETag no object has: S3 ETags are hex digests.
const neverMatches = `"fencelock-probe-etag-that-never-matches"`

// checkState is what a Store knows about its server's conditional writes.
// One check runs at a time; a passed check is kept for the Store's life, as
// is a server found not to honour them. Errors that say nothing about the
// server (no answer, access denied) are not kept, so the next write checks
// again.
type checkState struct {
	sem     chan struct{} // one slot: held by the check under way
	passed  atomic.Bool
	verdict atomic.Pointer[error] // a kept ErrConditionalUnsupported
}

func newCheckState() *checkState { return &checkState{sem: make(chan struct{}, 1)} }

// CheckConditionalWrites checks that the server honours conditional writes,
// without which a [Store] cannot fence: it makes sure the probe object
// ([WithProbeKey], by default [DefaultProbeKey]) exists, then sends two PUTs
// that a server honouring the conditions must refuse: If-None-Match: * on
// that existing object (412 expected) and If-Match with an ETag no object
// has (412, or 404 if the object has meanwhile gone). A server or proxy that
// applies either PUT, or answers 501, makes it return an error matching
// [ErrConditionalUnsupported], and the Store then refuses every write with
// that error. Other errors ([ErrAccessDenied] when the credentials may not
// write the probe key, [ErrNoSuchBucket], no answer) say nothing about the
// server and are returned as they are.
//
// A Store runs the check by itself before its first write, unless
// [WithConditionalCheck](false) turned that off; calling it again re-checks
// and records the new result. It writes only the probe object, whose
// content does not matter. ctx bounds the check; it is safe for concurrent
// use, and a nil ctx is an error ([ErrInvalidArgument]).
func (s *Store) CheckConditionalWrites(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := s.check.acquire(ctx); err != nil {
		return err
	}
	defer s.check.release()
	return s.check.run(ctx, s.probe)
}

// ensureConditional runs the checks a write needs once before the Store's
// first write (and, for a multipart write, before its first multipart
// write), if enabled; a kept verdict, even from a check the caller ran, is
// returned without I/O.
func (s *Store) ensureConditional(ctx context.Context, multipart bool) error {
	if err := s.ensure(ctx, s.check, s.probe); err != nil || !multipart {
		return err
	}
	return s.ensure(ctx, s.mpCheck, s.probeMultipart)
}

// ensure runs probe under c unless c has a kept verdict.
func (s *Store) ensure(ctx context.Context, c *checkState, probe func(context.Context) error) error {
	if c.passed.Load() {
		return nil
	}
	if v := c.verdict.Load(); v != nil || !s.opts.check {
		return deref(v)
	}
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	if c.passed.Load() {
		return nil
	}
	if v := c.verdict.Load(); v != nil {
		return *v
	}
	return c.run(ctx, probe)
}

// run probes the server and records a verdict about it, if any.
func (c *checkState) run(ctx context.Context, probe func(context.Context) error) error {
	err := probe(ctx)
	switch {
	case err == nil:
		c.verdict.Store(nil)
		c.passed.Store(true)
	case errors.Is(err, ErrConditionalUnsupported):
		c.passed.Store(false)
		c.verdict.Store(&err)
	}
	return err
}

// probe sends the check's three PUTs.
func (s *Store) probe(ctx context.Context) error {
	if err := s.probePut(ctx, nil, aws.String("*")); err != nil && classifyPut(err) != putRefused {
		return s.probeFailure(err)
	}
	for _, st := range probeSteps {
		err := s.probePut(ctx, st.ifMatch, st.ifNoneMatch)
		switch {
		case err == nil:
			return s.ignored("a PUT", st.what)
		case classifyPut(err) != putRefused:
			return s.probeFailure(err)
		}
	}
	return nil
}

// probeSteps are the conditional writes a check sends, each of which a
// server that honours the conditions refuses.
var probeSteps = []struct {
	ifMatch, ifNoneMatch *string
	what                 string
}{
	{nil, aws.String("*"), "If-None-Match: * on an existing object"},
	{aws.String(neverMatches), nil, "If-Match with an ETag the object does not have"},
}

// ignored is the verdict on a server that applied a conditional write whose
// condition did not hold.
func (s *Store) ignored(request, condition string) error {
	return fmt.Errorf("%w: s3://%s/%s: the server applied %s with %s; it ignores the condition, so fenced writes are refused",
		ErrConditionalUnsupported, s.bucket, s.opts.probeKey, request, condition)
}

// probePut sends one PUT of the probe object under the given conditions.
func (s *Store) probePut(ctx context.Context, ifMatch, ifNoneMatch *string) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:              &s.bucket,
		Key:                 &s.opts.probeKey,
		Body:                bytes.NewReader(probeBody),
		ContentLength:       aws.Int64(int64(len(probeBody))),
		IfMatch:             ifMatch,
		IfNoneMatch:         ifNoneMatch,
		ExpectedBucketOwner: s.owner(),
	})
	return err
}

func (s *Store) probeFailure(err error) error {
	if apiCode(err) == "NoSuchBucket" {
		return s.failure("conditional-write check: put", s.opts.probeKey, err)
	}
	return fmt.Errorf("s3fence: checking conditional writes: %w", s.putFailure(s.opts.probeKey, err))
}

func (c *checkState) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("s3fence: waiting for the conditional-write check: %w", ctx.Err())
	}
}

func (c *checkState) release() { <-c.sem }

func deref(p *error) error {
	if p == nil {
		return nil
	}
	return *p
}
