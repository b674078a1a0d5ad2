package fence_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStoreConformance(t *testing.T) {
	fencetest.Run(t, func(*testing.T) fence.Store { return fence.NewMemoryStore() })
}

func TestZeroMemoryStore(t *testing.T) {
	var s fence.MemoryStore
	if err := s.Put(t.Context(), "k", 1, []byte("v")); err != nil {
		t.Fatalf("Put on zero MemoryStore: got %v, want nil", err)
	}
}

// TestConformanceSuiteCatchesUnfencedStore is the suite's own control: run
// against a store that ignores tokens, it must fail. The test re-runs itself
// in a child process, where it plays the broken adapter.
func TestConformanceSuiteCatchesUnfencedStore(t *testing.T) {
	if childtest.InChild() {
		fencetest.Run(t, func(*testing.T) fence.Store { return &lastWriterWins{} })
		return
	}
	out := childtest.FailingOutput(t)
	for _, sub := range []string{"StaleRefusedAndNothingChanged", "HigherTokenBecomesFloor", "ConcurrentWriters"} {
		if !strings.Contains(out, "--- FAIL: TestConformanceSuiteCatchesUnfencedStore/"+sub) {
			t.Errorf("subtest %s did not fail against the unfenced store:\n%s", sub, out)
		}
	}
}

func TestMemoryStoreContention(t *testing.T) {
	s := fence.NewMemoryStore()
	fencetest.RunContention(t, func(*testing.T) fence.Store { return s })
}

// TestContentionCatchesNonAtomicStore is RunContention's control: a store
// that checks the token and then stores in two steps, as an S3 server whose
// conditional PUT is not atomic does, must fail it. (With Run's small values
// the gap between the steps is too short to be seen reliably.)
func TestContentionCatchesNonAtomicStore(t *testing.T) {
	if childtest.InChild() {
		s := &checkThenStore{}
		fencetest.RunContention(t, func(*testing.T) fence.Store { return s })
		return
	}
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "a stale write landed") {
		t.Errorf("RunContention failed, but not on a stale write:\n%s", out)
	}
}

// checkThenStore fences, but not atomically: it reads the key's token, then
// takes time in proportion to the value's size (as a server storing the
// body does), then stores if the token it read was not higher.
type checkThenStore struct {
	mu   sync.Mutex
	recs map[string]fence.Record
}

func (s *checkThenStore) Put(ctx context.Context, k string, tok fence.Token, v []byte) error {
	cur, err := s.Get(ctx, k)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		return err
	}
	if cur.Token > tok {
		return &fence.StaleError{Resource: k, Token: tok, Current: cur.Token}
	}
	time.Sleep(time.Duration(len(v)/4096) * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = make(map[string]fence.Record)
	}
	s.recs[k] = fence.Record{Value: bytes.Clone(v), Token: tok}
	return nil
}

func (s *checkThenStore) Get(ctx context.Context, k string) (fence.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[k]
	if !ok {
		return fence.Record{}, fence.ErrNotFound
	}
	return r, nil
}

// TestConformanceSuiteCatchesUnfencedReads is the read cases' control: a
// store that fences its writes but whose GetForUpdate is a plain Get and
// whose Update is a Get then a Put (the code a user writes without
// Updater) must fail them.
func TestConformanceSuiteCatchesUnfencedReads(t *testing.T) {
	if childtest.InChild() {
		fencetest.Run(t, func(*testing.T) fence.Store { return readsUnfenced{fence.NewMemoryStore()} })
		return
	}
	out := childtest.FailingOutput(t)
	for _, sub := range []string{"ReadClaims", "ReadRecord", "ReadMissing", "UpdateLateWrite"} {
		if !strings.Contains(out, "--- FAIL: TestConformanceSuiteCatchesUnfencedReads/"+sub) {
			t.Errorf("subtest %s did not fail against the store with unfenced reads:\n%s", sub, out)
		}
	}
}

// readsUnfenced fences writes (its MemoryStore's Put) but not reads.
type readsUnfenced struct{ *fence.MemoryStore }

func (s readsUnfenced) GetForUpdate(ctx context.Context, k string, tok fence.Token) (fence.Record, error) {
	if err := fence.CheckRead(ctx, k, tok); err != nil {
		return fence.Record{}, err
	}
	return s.Get(ctx, k)
}

func (s readsUnfenced) Update(ctx context.Context, k string, tok fence.Token, fn fence.UpdateFunc) error {
	if err := fence.CheckUpdate(ctx, k, tok, fn); err != nil {
		return err
	}
	old, err := s.Get(ctx, k)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		return err
	}
	runtime.Gosched() // let a concurrent Update read the same record
	v, err := fn(old)
	if err != nil {
		return err
	}
	return s.Put(ctx, k, tok, v)
}

// TestConformanceSuiteCatchesUpdateAllByLegs is the UpdateAll cases'
// control: a store whose UpdateAll claims every key and then writes them
// one by one, each write fenced (an Update per leg), must fail the
// transfer: its first leg lands and its second is refused.
func TestConformanceSuiteCatchesUpdateAllByLegs(t *testing.T) {
	if childtest.InChild() {
		fencetest.Run(t, func(*testing.T) fence.Store { return allByLegs{fence.NewMemoryStore()} })
		return
	}
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "--- FAIL: TestConformanceSuiteCatchesUpdateAllByLegs/UpdateAllTransfer") {
		t.Errorf("subtest UpdateAllTransfer did not fail against the store that writes leg by leg:\n%s", out)
	}
}

// allByLegs is a MemoryStore whose UpdateAll is not atomic.
type allByLegs struct{ *fence.MemoryStore }

func (s allByLegs) UpdateAll(ctx context.Context, claims []fence.Claim, fn fence.UpdateAllFunc) error {
	set, err := fence.CheckUpdateAll(ctx, claims, fn)
	if err != nil {
		return err
	}
	old := make(map[string]fence.Record, len(set))
	for _, c := range set {
		r, err := s.GetForUpdate(ctx, c.Resource, c.Token)
		if err != nil && !errors.Is(err, fence.ErrNotFound) {
			return err
		}
		old[c.Resource] = r
	}
	next, err := fence.CallUpdateAll(fn, set, old)
	if err != nil {
		return err
	}
	for _, c := range set {
		if v, ok := next[c.Resource]; ok {
			if err := s.Put(ctx, c.Resource, c.Token, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestConformanceSuiteCatchesUpdateAllWithoutRecordCompare is the other
// control of the UpdateAll cases: a store whose UpdateAll checks every
// floor and writes every key atomically, but compares no record, must
// fail UpdateAllSameTokenBetween: the same holder's write between the
// read and the write is lost. (The transfer is refused by the newer
// floor, and the concurrent writers, with the same tokens, each write
// both accounts from one snapshot, so the other cases pass it.)
func TestConformanceSuiteCatchesUpdateAllWithoutRecordCompare(t *testing.T) {
	if childtest.InChild() {
		fencetest.Run(t, func(*testing.T) fence.Store { return newFloorsOnly() })
		return
	}
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "--- FAIL: TestConformanceSuiteCatchesUpdateAllWithoutRecordCompare/UpdateAllSameTokenBetween") {
		t.Errorf("subtest UpdateAllSameTokenBetween did not fail against the store that compares no record:\n%s", out)
	}
}

// floorsOnly is a MemoryStore whose UpdateAll claims every key, and at
// the write checks every floor and writes every key under one lock (as one
// server transaction would), but compares no record.
type floorsOnly struct {
	*fence.MemoryStore
	mu *sync.Mutex
}

func newFloorsOnly() floorsOnly { return floorsOnly{fence.NewMemoryStore(), new(sync.Mutex)} }

func (s floorsOnly) UpdateAll(ctx context.Context, claims []fence.Claim, fn fence.UpdateAllFunc) error {
	set, err := fence.CheckUpdateAll(ctx, claims, fn)
	if err != nil {
		return err
	}
	claim := func() (map[string]fence.Record, error) {
		old := make(map[string]fence.Record, len(set))
		for _, c := range set {
			r, err := s.GetForUpdate(ctx, c.Resource, c.Token)
			if err != nil && !errors.Is(err, fence.ErrNotFound) {
				return nil, err
			}
			old[c.Resource] = r
		}
		return old, nil
	}
	s.mu.Lock()
	old, err := claim()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	next, err := fence.CallUpdateAll(fn, set, old)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := claim(); err != nil { // every floor still its token
		return err
	}
	for _, c := range set {
		if v, ok := next[c.Resource]; ok {
			if err := s.Put(ctx, c.Resource, c.Token, v); err != nil {
				return err
			}
		}
	}
	return nil
}
