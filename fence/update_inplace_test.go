package fence_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
)

// aliasingStore is mapStore (example_rounds_test.go) whose Update's write
// is conditional on the value read, compared by its bytes, and shares
// them with the record fn gets: the mistake fencetest's UpdateInPlace
// catches (fence/sql's and fence/postgres's rounds made it).
type aliasingStore struct{ *mapStore }

func (s aliasingStore) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	return fence.RunUpdate(ctx, (*aliasingRounds)(s.mapStore), key, token, fn)
}

type aliasingRounds mapStore

func (r *aliasingRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, []byte, error) {
	rec, _, err := (*mapRounds)(r).ClaimRead(ctx, key, token)
	return rec, rec.Value, err // the mistake: read is rec.Value itself
}

func (r *aliasingRounds) WriteIf(_ context.Context, key string, token fence.Token, read, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.recs[key]
	switch {
	case token < e.floor:
		return &fence.StaleError{Resource: key, Token: token, Current: e.floor}
	case e.set != (read != nil) || !bytes.Equal(e.value, read):
		return fence.ErrChanged
	}
	r.recs[key] = mapEntry{floor: token, value: bytes.Clone(value), set: true, version: e.version + 1}
	return nil
}

// TestUpdateInPlaceCatchesAliasing is UpdateInPlace's control: against a
// store whose write's condition shares its bytes with fn's record, the
// case fails. It re-runs itself in a child process, where it plays that
// store.
func TestUpdateInPlaceCatchesAliasing(t *testing.T) {
	if childtest.InChild() {
		fencetest.Run(t, func(*testing.T) fence.Store { return aliasingStore{newMapStore()} })
		return
	}
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "--- FAIL: TestUpdateInPlaceCatchesAliasing/UpdateInPlace") {
		t.Errorf("UpdateInPlace did not fail against the aliasing store:\n%s", out)
	}
}
