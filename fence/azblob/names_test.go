package azblobfence_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Azure (and Azurite) turn a backslash in a blob's name into a slash, so
// key `a\b` would be the blob of key "a/b": a write of one would replace
// the other's record, and a holder of one key's lock would fence the
// other's. A key or prefix with a backslash is refused before any I/O,
// and the other key's record is left alone.
func TestBackslashKeyRefused(t *testing.T) {
	p := fencewant.Prefix(t)
	s := newStore(t, azblobfence.WithPrefix(p))
	fencewant.Put(t, s, "a/b", 5, "a/b's")
	if err := s.Put(t.Context(), `a\b`, 9, []byte(`a\b's`)); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`Put(a\b): got %v, want ErrInvalidKey`, err)
	}
	if err := s.Delete(t.Context(), `a\b`, 9); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`Delete(a\b): got %v, want ErrInvalidKey`, err)
	}
	if _, err := s.GetForUpdate(t.Context(), `a\b`, 9); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`GetForUpdate(a\b): got %v, want ErrInvalidKey`, err)
	}
	if _, err := s.Get(t.Context(), `a\b`); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`Get(a\b): got %v, want ErrInvalidKey`, err)
	}
	withBackslash := newStore(t, azblobfence.WithPrefix(p[:len(p)-1]+`\`))
	if err := withBackslash.Put(t.Context(), "a/b", 9, []byte("other")); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`Put under a prefix ending in \: got %v, want ErrInvalidKey`, err)
	}
	fencewant.Record(t, s, "a/b", 5, "a/b's")
}

// Azure's rules for blob names: avoid a name that ends in a dot or a
// slash, and a path segment that ends in a dot. Azure may strip the dot
// (so "k." would be the blob of "k", or the request's signature would not
// match the name it stored), so such a key, or a prefix making one, is
// refused before any I/O; Azurite keeps them, which is why only the
// refusal can be tested here. Names that merely contain dots pass.
func TestDotAndSlashNamesRefused(t *testing.T) {
	var f httpfault.Transport // counts every request
	c := client(t, func(next http.RoundTripper) http.RoundTripper { f.Next = next; return &f })
	p := fencewant.Prefix(t)
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	for _, k := range []string{"k.", "k/", ".", "..", "a/..", "a/../b", "a/./b", "a./b", "k./"} {
		if err := s.Put(t.Context(), k, 5, []byte("v")); !errors.Is(err, fence.ErrInvalidKey) {
			t.Errorf("Put(%q): got %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrInvalidKey) {
			t.Errorf("Get(%q): got %v, want ErrInvalidKey", k, err)
		}
	}
	if err := mustNew(t, c, azblobfence.WithPrefix("v1./")).Put(t.Context(), "k", 5, []byte("v")); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf(`Put under prefix "v1./": got %v, want ErrInvalidKey`, err)
	}
	if n := f.Sent(); n != 0 {
		t.Fatalf("requests sent by refused calls: %d, want 0", n)
	}
	for _, k := range []string{"k.v", ".k", "a/.b", "v1.2/k", "a.b/c"} {
		fencewant.Put(t, s, k, 5, k)
		fencewant.Record(t, s, k, 5, k)
	}
}

// A value longer than one Put Blob takes is refused before it is sent,
// by Put and as an Update's result (the claim stays). The slice is never
// written to, so it costs address space, not memory.
func TestTooLargeRefused(t *testing.T) {
	testenv.Long(t, "a value of 5000 MiB + 1, address space only")
	var f httpfault.Transport
	c := client(t, func(next http.RoundTripper) http.RoundTripper {
		f.Next, f.Match = next, func(r *http.Request) bool { return r.Method == http.MethodPut }
		return &f
	})
	s := mustNew(t, c, azblobfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "k", 5, "a")
	huge := make([]byte, azblobfence.MaxValueSize+1)
	before := f.Sent()
	if err := s.Put(t.Context(), "k", 7, huge); !errors.Is(err, azblobfence.ErrTooLarge) || !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("Put of %d bytes: got %v, want ErrTooLarge", len(huge), err)
	}
	if n := f.Sent() - before; n != 0 {
		t.Errorf("Put Blob requests for the refused Put: %d, want 0", n)
	}
	err := s.Update(t.Context(), "k", 7, func(fence.Record) ([]byte, error) { return huge, nil })
	if !errors.Is(err, azblobfence.ErrTooLarge) {
		t.Errorf("Update returning %d bytes: got %v, want ErrTooLarge", len(huge), err)
	}
	fencewant.Record(t, s, "k", 7, "a") // claimed, value unchanged
}
