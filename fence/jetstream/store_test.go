package jsfence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Delete leaves the floor: the record is gone, a lower token is refused,
// a higher one writes. The control deletes the key with kv.Delete: the
// floor goes with it, and the lower token lands.
func TestDeleteKeepsFloor(t *testing.T) {
	kv, _ := bucket(t)
	s := mustNew(t, kv)
	mustPut(t, s, "k", 5, "a")
	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatalf("Delete: got %v, want nil", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if _, err := s.GetForUpdate(t.Context(), "k", 7); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate after Delete: got %v, want ErrNotFound", err)
	}
	fencewant.Stale(t, s.Put(t.Context(), "k", 6, []byte("b")), 6, 7)
	fencewant.Stale(t, s.Delete(t.Context(), "k", 6), 6, 7)
	mustPut(t, s, "k", 8, "c")
	wantRecord(t, s, "k", 8, "c")

	t.Run("control: kv.Delete", func(t *testing.T) {
		mustPut(t, s, "c", 5, "a")
		if err := kv.Delete(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, "c", 3, "b")
		wantRecord(t, s, "c", 3, "b")
	})
}

// WithPrefix puts a Store's entries under its prefix in the bucket, and
// two Stores with different prefixes keep two floors for one key.
func TestPrefix(t *testing.T) {
	kv, _ := bucket(t)
	a, err := jsfence.New(kv, jsfence.WithPrefix("a/"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsfence.New(kv, jsfence.WithPrefix("b/"))
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, "k", 9, "a")
	mustPut(t, b, "k", 3, "b")
	if got := a.Key("k"); got != "a/k" {
		t.Fatalf("Key: got %q, want \"a/k\"", got)
	}
	if e, err := kv.Get(t.Context(), "a/k"); err != nil || string(e.Value()[jsfence.HeaderSize:]) != "a" {
		t.Fatalf("the entry a/k: got %v, want the value \"a\"", err)
	}
	wantRecord(t, b, "k", 3, "b")
}
