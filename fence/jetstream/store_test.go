package jsfence_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
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
	fencewant.Record(t, s, "k", 8, "c")

	t.Run("control: kv.Delete", func(t *testing.T) {
		mustPut(t, s, "c", 5, "a")
		if err := kv.Delete(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, "c", 3, "b")
		fencewant.Record(t, s, "c", 3, "b")
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
	fencewant.Record(t, b, "k", 3, "b")
}

// A bucket deleted and created again starts its revisions over: a Store
// made before, with its revision cache, writes token 3 on the revision it
// cached, which is now token 9's entry, and lands (the hazard the package
// documentation names). WithoutRevisionCache reads first, and refuses.
func TestRecreatedBucket(t *testing.T) {
	run := func(t *testing.T, opts ...jsfence.Option) (fence.Record, error) {
		kv, name := bucket(t)
		s := mustNew(t, kv, opts...)
		mustPut(t, s, "k", 3, "a") // revision 1, cached
		js := natstest.New(t).JetStream(t)
		if err := js.DeleteKeyValue(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		again, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, History: 10})
		if err != nil {
			t.Fatal(err)
		}
		other := mustNew(t, again)
		mustPut(t, other, "k", 9, "b") // revision 1 again
		err = s.Put(t.Context(), "k", 3, []byte("late"))
		r, gerr := other.Get(t.Context(), "k")
		if gerr != nil {
			t.Fatal(gerr)
		}
		return r, err
	}
	r, err := run(t, jsfence.WithoutRevisionCache())
	fencewant.Stale(t, err, 3, 9)
	if r.Token != 9 {
		t.Fatalf("after the refused Put: token %d, want 9", r.Token)
	}
	t.Run("control: the cache", func(t *testing.T) {
		if r, err := run(t); err != nil || r.Token != 3 || string(r.Value) != "late" {
			t.Fatalf("Put on the cached revision: got %v, token %d %q, want nil, token 3 \"late\" (landed over token 9)", err, r.Token, r.Value)
		}
	})
}
