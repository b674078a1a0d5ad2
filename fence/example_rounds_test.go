package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

// mapStore is a third party's adapter, as small as one gets: a map whose
// entries carry a floor (the highest token seen) and a version. Its Update
// is fence.RunUpdate over mapRounds, which supplies a claim-and-read and a
// conditional write.
type mapStore struct {
	mu   sync.Mutex
	recs map[string]mapEntry // guarded by mu
}

type mapEntry struct {
	floor   fence.Token
	value   []byte
	set     bool
	version int // the entry's changes, claims included
}

func newMapStore() *mapStore { return &mapStore{recs: map[string]mapEntry{}} }

// Put is the fenced write every Store has.
func (s *mapStore) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.recs[key]
	if token < e.floor {
		return &fence.StaleError{Resource: key, Token: token, Current: e.floor}
	}
	s.recs[key] = mapEntry{floor: token, value: append([]byte{}, value...), set: true, version: e.version + 1}
	return nil
}

// Get is a plain read.
func (s *mapStore) Get(ctx context.Context, key string) (fence.Record, error) {
	if key == "" {
		return fence.Record{}, fence.ErrInvalidKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.recs[key]
	if !e.set {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return fence.Record{Value: append([]byte{}, e.value...), Token: e.floor}, nil
}

// GetForUpdate is a claim-and-read alone.
func (s *mapStore) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	rec, _, err := (*mapRounds)(s).ClaimRead(ctx, key, token)
	return rec, err
}

// Update is the loop of package fence over the store's two halves.
func (s *mapStore) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	return fence.RunUpdate(ctx, (*mapRounds)(s), key, token, fn)
}

// mapRounds is the store's fence.UpdateRounds; the version read is what
// its write compares.
type mapRounds mapStore

func (r *mapRounds) ClaimRead(_ context.Context, key string, token fence.Token) (fence.Record, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.recs[key]
	switch {
	case token < e.floor:
		return fence.Record{}, 0, &fence.StaleError{Resource: key, Token: token, Current: e.floor}
	case token > e.floor:
		e.floor, e.version = token, e.version+1
		r.recs[key] = e
	}
	if !e.set {
		return fence.Record{}, e.version, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return fence.Record{Value: append([]byte{}, e.value...), Token: token}, e.version, nil
}

func (r *mapRounds) WriteIf(_ context.Context, key string, token fence.Token, version int, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.recs[key]
	switch {
	case token < e.floor:
		return &fence.StaleError{Resource: key, Token: token, Current: e.floor}
	case e.version != version:
		return fence.ErrChanged // the loop reads again
	}
	r.recs[key] = mapEntry{floor: token, value: append([]byte{}, value...), set: true, version: version + 1}
	return nil
}

// An adapter of your own gets fence's update loop by supplying a
// claim-and-read and a conditional write: fence.RunUpdate checks the
// arguments, runs the rounds, and returns fence.ErrConflict,
// fence.ErrStale or fn's error as every adapter of this module does.
func ExampleRunUpdate() {
	ctx := context.Background()
	s := newMapStore()
	inc := func(old fence.Record) ([]byte, error) {
		n, _ := strconv.Atoi(string(old.Value)) // the zero Record: no value yet
		return strconv.AppendInt(nil, int64(n+1), 10), nil
	}
	for range 2 {
		if err := fence.RunUpdate(ctx, (*mapRounds)(s), "visits", 7, inc); err != nil {
			fmt.Println(err)
		}
	}
	rec, _ := s.Get(ctx, "visits")
	fmt.Printf("%s with token %d\n", rec.Value, rec.Token)

	err := s.Update(ctx, "visits", 6, inc) // an older holder
	fmt.Println(errors.Is(err, fence.ErrStale))
	err = s.Update(ctx, "", 7, inc)
	fmt.Println(errors.Is(err, fence.ErrInvalidKey))
	// Output:
	// 2 with token 7
	// true
	// true
}

// The toy adapter, whose Update is RunUpdate, passes the conformance
// suite: the loop keeps the contract for a store outside this module.
func TestRunUpdateConformance(t *testing.T) {
	fencetest.Run(t, func(*testing.T) fence.Store { return newMapStore() })
}
