package sqlfence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func TestStoreConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		fencetest.Run(t, func(*testing.T) fence.Store { return s })
	})
}

// TestStoreContention runs the suite's many-writers case: in SQLite every
// writer but one finds the write lock taken (SQLITE_BUSY, no busy_timeout),
// in MariaDB concurrent first writes to a new key can deadlock on the
// upsert's next-key locks; neither may surface as a wrong outcome.
func TestStoreContention(t *testing.T) {
	testenv.Long(t, "contention on every dialect (about 9 s)")
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		fencetest.RunContention(t, func(*testing.T) fence.Store { return s }, fencetest.WithValueSize(1<<20))
	})
}

func TestStoreDelete(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		ctx := t.Context()
		if err := s.Put(ctx, "k", 5, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "k", 6); err != nil {
			t.Fatalf("Delete: got %v, want nil", err)
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Get after Delete: got %v, want fence.ErrNotFound", err)
		}
		if err := s.Put(ctx, "k", 5, []byte("late")); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Put after Delete: got %v, want fence.ErrStale (the tombstone keeps the floor)", err)
		}
		if err := s.Put(ctx, "k", 7, nil); err != nil {
			t.Fatalf("Put after Delete: got %v, want nil", err)
		}
		r, err := s.Get(ctx, "k")
		if err != nil || r.Token != 7 || len(r.Value) != 0 || r.Value == nil {
			t.Fatalf("Get of an empty value: got %+v, %v, want token 7 and an empty, non-nil value", r, err)
		}
	})
}

// TestStoreKeysExact: keys that MySQL's default collations would call
// equal ("a", "A", "a ") are three keys with three floors.
func TestStoreKeysExact(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		ctx := t.Context()
		for i, k := range []string{"a", "A", "a "} {
			if err := s.Put(ctx, k, fence.Token(10-i), []byte(k)); err != nil {
				t.Fatalf("Put(%q, %d): got %v, want nil (a key of its own)", k, 10-i, err)
			}
		}
		for i, k := range []string{"a", "A", "a "} {
			r, err := s.Get(ctx, k)
			if err != nil || string(r.Value) != k || r.Token != fence.Token(10-i) {
				t.Fatalf("Get(%q): got %q token %d, %v; want %q token %d", k, r.Value, r.Token, err, k, 10-i)
			}
		}
	})
}

func TestCreateSchema(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db := srv.open(t)
		for range 2 { // idempotent
			if err := sqlfence.CreateSchema(t.Context(), db, srv.d); err != nil {
				t.Fatalf("CreateSchema: got error %v, want nil", err)
			}
		}
	})
}
