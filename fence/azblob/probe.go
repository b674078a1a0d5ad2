package azblobfence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
)

// ProbeKey is the key, under the store's prefix, of the blob
// [Store.CheckConditionalWrites] writes. It holds a line of text saying
// what it is, is not a fenced record, and may be deleted.
const ProbeKey = "fencelock-probe/conditional-writes"

var probeBody = []byte("fencelock: a probe of conditional writes (If-Match, If-None-Match); not a fenced record, may be deleted\n")

// neverMatches is an ETag no blob has.
const neverMatches = azcore.ETag(`"0x0FE4CE10C4000000"`)

// CheckConditionalWrites makes sure the server honours If-Match and
// If-None-Match on Put Blob, without which no write is fenced: on the
// blob [ProbeKey] (under the store's prefix) it writes with
// If-None-Match: * (refused when the blob is there already), then sends
// two writes the server must refuse, one with If-None-Match: * and one
// with an If-Match no blob has, and returns an error matching
// [ErrConditionalUnsupported] if either landed. A Store runs it before
// its first write ([WithConditionalCheck]); its verdict is kept, once it
// passed or found the server ignores the conditions, for every later
// write of the Store. Other failures (the network) are returned, and the
// next write checks again. Azure Storage honours the conditions;
// Azurite 3.33.0 passes (every Store of the tests runs it).
func (s *Store) CheckConditionalWrites(ctx context.Context) error {
	if err := s.checkCall(ctx, ProbeKey); err != nil {
		return err
	}
	return s.check.run(ctx, s.probe)
}

// probe sends the check's three writes.
func (s *Store) probe(ctx context.Context) error {
	if err := s.probePut(ctx, ptrETag(azcore.ETagAny), nil); err != nil && classify(err) != putRefused {
		return s.probeFailure(err)
	}
	for _, st := range []struct {
		ifNoneMatch, ifMatch *azcore.ETag
		what                 string
	}{
		{ptrETag(azcore.ETagAny), nil, "If-None-Match: * on a blob that exists"},
		{nil, ptrETag(neverMatches), "If-Match with an ETag the blob does not have"},
	} {
		err := s.probePut(ctx, st.ifNoneMatch, st.ifMatch)
		switch {
		case err == nil:
			return fmt.Errorf("%w: %s: the server applied a Put Blob with %s", ErrConditionalUnsupported, s.Blob(ProbeKey), st.what)
		case classify(err) != putRefused:
			return s.probeFailure(err)
		}
	}
	return nil
}

// probePut sends one Put Blob of the probe blob, sent once.
func (s *Store) probePut(ctx context.Context, ifNoneMatch, ifMatch *azcore.ETag) error {
	ctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	_, err := s.blob(ProbeKey).Upload(ctx, streaming.NopCloser(bytes.NewReader(probeBody)), &blockblob.UploadOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: ifNoneMatch, IfMatch: ifMatch}},
	})
	return err
}

func (s *Store) probeFailure(err error) error {
	if _, rerr := s.readFailure(ProbeKey, err); errors.Is(rerr, ErrNoContainer) {
		return rerr
	}
	return fmt.Errorf("azblobfence: checking conditional writes on %s: %w", s.Blob(ProbeKey), err)
}

// checkState is a Store's check of the server before its first write:
// one check at a time, its verdict kept once it passed, or once it found
// the server ignores the conditions.
type checkState struct {
	on  bool          // set once: WithConditionalCheck's
	sem chan struct{} // held while a check runs

	mu      sync.Mutex // guards passed and verdict
	passed  bool
	verdict error // ErrConditionalUnsupported's, once found
}

func newCheckState(on bool) *checkState {
	return &checkState{on: on, sem: make(chan struct{}, 1), passed: !on}
}

// kept returns the kept verdict: done when there is one.
func (c *checkState) kept() (done bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passed || c.verdict != nil, c.verdict
}

// ensureChecked runs the check unless it has a kept verdict, or is off.
func (s *Store) ensureChecked(ctx context.Context) error {
	if done, err := s.check.kept(); done {
		return err
	}
	return s.check.run(ctx, s.probe)
}

// run runs probe, one at a time, and keeps its verdict; a kept verdict
// found meanwhile is returned instead.
func (c *checkState) run(ctx context.Context, probe func(context.Context) error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("azblobfence: waiting for the conditional-write check: %w", ctx.Err())
	}
	defer func() { <-c.sem }()
	if done, err := c.kept(); done && (err != nil || c.on) {
		return err
	}
	err := probe(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.passed = true
	case errors.Is(err, ErrConditionalUnsupported):
		c.verdict = err
	}
	return err
}

// ignoreOwnForTest makes a write not recognise its own id in the blob,
// for the control of the test that shows why it does.
var ignoreOwnForTest atomic.Bool

// landed reports whether the blob read, v, carries write w: a copy of w
// landed (unless ignoreOwnForTest).
func (v version) landed(w version) bool {
	return v.exists() && v.id == w.id && !ignoreOwnForTest.Load()
}
