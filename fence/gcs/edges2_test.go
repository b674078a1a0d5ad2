package gcsfence_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

func TestReviewGCSLateAndLost(t *testing.T) {
	var f faults
	p := fencewant.Prefix(t)
	s := mustNew(t, client(t, wrap(&f)), gcsfence.WithPrefix(p))
	other := newStore(t, gcsfence.WithPrefix(p))
	late := func(send func() error, newer func()) error {
		held, release := f.HoldNextRequest()
		errc := make(chan error, 1)
		go func() { errc <- send() }()
		<-held
		newer()
		close(release)
		return <-errc
	}
	t.Run("Delete late", func(t *testing.T) {
		fencewant.Put(t, s, "d", 5, "a")
		fencewant.Stale(t, late(func() error { return s.Delete(t.Context(), "d", 7) }, func() { fencewant.Put(t, other, "d", 9, "b") }), 7, 9)
		fencewant.Record(t, other, "d", 9, "b")
	})
	t.Run("GetForUpdate claim late", func(t *testing.T) {
		fencewant.Put(t, s, "g", 5, "a")
		fencewant.Stale(t, late(func() error { _, err := s.GetForUpdate(t.Context(), "g", 7); return err }, func() { fencewant.Put(t, other, "g", 9, "b") }), 7, 9)
		fencewant.Record(t, other, "g", 9, "b")
	})
	t.Run("Update claim late", func(t *testing.T) {
		fencewant.Put(t, s, "uc", 5, "a")
		calls := 0
		err := late(func() error {
			return s.Update(t.Context(), "uc", 7, func(fence.Record) ([]byte, error) { calls++; return []byte("u"), nil })
		}, func() { fencewant.Put(t, other, "uc", 9, "b") })
		fencewant.Stale(t, err, 7, 9)
		fencewant.Record(t, other, "uc", 9, "b")
		if calls != 0 {
			t.Fatalf("fn called %d times", calls)
		}
	})
	t.Run("Update write late", func(t *testing.T) {
		fencewant.Put(t, s, "uw", 5, "a")
		var held, release chan struct{}
		ready := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- s.Update(t.Context(), "uw", 7, func(fence.Record) ([]byte, error) {
				if held == nil {
					held, release = f.HoldNextRequest()
					close(ready)
				}
				return []byte("u"), nil
			})
		}()
		<-ready
		<-held
		fencewant.Put(t, other, "uw", 9, "b")
		close(release)
		fencewant.Stale(t, <-errc, 7, 9)
		fencewant.Record(t, other, "uw", 9, "b")
	})
	t.Run("lost then cached", func(t *testing.T) {
		// Reply of Put 7 lost after it landed; a newer holder writes 9; Put 8 by s must be stale, not land.
		fencewant.Put(t, s, "c", 5, "a")
		f.LoseNextReply(func() {})
		fencewant.Unknown(t, s.Put(t.Context(), "c", 7, []byte("c")), 7)
		fencewant.Put(t, other, "c", 9, "b")
		fencewant.Stale(t, s.Put(t.Context(), "c", 8, []byte("x")), 8, 9)
		fencewant.Record(t, other, "c", 9, "b")
		// Lost claim, lost Update write.
		f.LoseNextReply(func() {})
		_, err := s.GetForUpdate(t.Context(), "c", 10)
		fencewant.Unknown(t, err, 10)
		err = s.Update(t.Context(), "c", 11, func(fence.Record) ([]byte, error) { f.LoseNextReply(func() {}); return []byte("u"), nil })
		fencewant.Unknown(t, err, 11)
		f.LoseNextReply(func() {})
		fencewant.Unknown(t, s.Delete(t.Context(), "c", 12), 12)
	})
}

// The header cache with several Stores and deletes by other means.
func TestReviewGCSCache(t *testing.T) {
	p := fencewant.Prefix(t)
	c := client(t)
	a := mustNew(t, c, gcsfence.WithPrefix(p))
	b := mustNew(t, c, gcsfence.WithPrefix(p))
	raw := c.Bucket(gcstest.Bucket)
	fencewant.Put(t, a, "k", 5, "a5")
	fencewant.Put(t, b, "k", 9, "b9")
	fencewant.Stale(t, a.Put(t.Context(), "k", 7, []byte("a7")), 7, 9)
	// Deleted by other means, recreated by b with a lower token (the floor is gone: documented).
	if err := raw.Object(p + "k").Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	fencewant.Put(t, b, "k", 3, "b3")
	// a's cache says 9 at an old generation: a's Put 4 must land (floor 3) and not say stale.
	if err := a.Put(t.Context(), "k", 4, []byte("a4")); err != nil {
		t.Fatalf("a Put 4 over b's 3 after a delete: %v", err)
	}
	fencewant.Record(t, b, "k", 4, "a4")
	// Delete then Put, and GetForUpdate then Put by another Store.
	if err := a.Delete(t.Context(), "k", 6); err != nil {
		t.Fatal(err)
	}
	fencewant.Stale(t, b.Put(t.Context(), "k", 5, []byte("b5")), 5, 6)
	if _, err := b.GetForUpdate(t.Context(), "k", 8); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("claim of a deleted key: %v", err)
	}
	fencewant.Stale(t, a.Put(t.Context(), "k", 7, []byte("a7")), 7, 8)
	fencewant.Put(t, a, "k", 8, "a8")
	if err := b.Update(t.Context(), "k", 8, func(r fence.Record) ([]byte, error) { return append(r.Value, '!'), nil }); err != nil {
		t.Fatal(err)
	}
	fencewant.Record(t, a, "k", 8, "a8!")
}

func TestReviewGCSShapes(t *testing.T) {
	p := fencewant.Prefix(t)
	c := client(t)
	s := mustNew(t, c, gcsfence.WithPrefix(p))
	big := make([]byte, 6<<20)
	rand.Read(big)
	for name, v := range map[string][]byte{"empty": {}, "nil": nil, "binary": {0, 0xff, 0}, "6MB": big} {
		if err := s.Put(t.Context(), name, 1, v); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r, err := s.Get(t.Context(), name)
		if err != nil || !bytes.Equal(r.Value, v) || r.Token != 1 {
			t.Errorf("%s: Get: %v, %d bytes", name, err, len(r.Value))
		}
	}
	for _, k := range []string{"a b", "a+b", "ü", "a#b?c", "a%2Fb", "x/../y", "//"} {
		if err := s.Put(t.Context(), k, 3, []byte(k)); err != nil {
			t.Errorf("key %q: Put: %v", k, err)
			continue
		}
		if err := s.Put(t.Context(), k, 2, []byte("x")); !errors.Is(err, fence.ErrStale) {
			t.Errorf("key %q: stale Put: %v", k, err)
		}
		r, err := s.Get(t.Context(), k)
		if err != nil || string(r.Value) != k {
			t.Errorf("key %q: Get: %v %q", k, err, r.Value)
		}
	}
	const top = fence.Token(1<<63 - 1)
	fencewant.Put(t, s, "max", top, "top")
	fencewant.Stale(t, s.Put(t.Context(), "max", top-1, []byte("b")), top-1, top)
	// Objects by other programs.
	put := func(name string, b []byte) {
		w := c.Bucket(gcstest.Bucket).Object(p + name).NewWriter(t.Context())
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	h0 := make([]byte, 17)
	copy(h0, "fencegcs")
	hneg := bytes.Clone(h0)
	binary.BigEndian.PutUint64(hneg[9:], 1<<63)
	for name, b := range map[string][]byte{"zero-token": h0, "neg-token": hneg, "empty-object": {}, "short": []byte("fence"), "bad-flag": append([]byte("fencegcs\x07"), make([]byte, 8)...)} {
		put(name, b)
		for op, do := range map[string]func() error{
			"Get":          func() error { _, err := s.Get(t.Context(), name); return err },
			"Put":          func() error { return s.Put(t.Context(), name, 5, []byte("v")) },
			"Delete":       func() error { return s.Delete(t.Context(), name, 5) },
			"GetForUpdate": func() error { _, err := s.GetForUpdate(t.Context(), name, 5); return err },
			"Update": func() error {
				return s.Update(t.Context(), name, 5, func(fence.Record) ([]byte, error) { return nil, nil })
			},
		} {
			if err := do(); !errors.Is(err, gcsfence.ErrCorrupt) {
				t.Errorf("%s on %s object: %v, want ErrCorrupt", op, name, err)
			}
		}
	}
}

// A cancelled context mid-upload.
func TestReviewGCSCancelMidUpload(t *testing.T) {
	p := fencewant.Prefix(t)
	s := mustNew(t, client(t), gcsfence.WithPrefix(p))
	big := make([]byte, 32<<20)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := s.Put(ctx, "k", 1, big)
	t.Logf("cancelled mid-upload: %v", err)
	if err != nil && !errors.Is(err, fence.ErrUnknownOutcome) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	_ = storage.ErrObjectNotExist
}
