package azblobfence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
)

// Azure (and Azurite) turn a backslash in a blob's name into a slash, so
// key `a\b` would be the blob of key "a/b": a write of one would replace
// the other's record, and a holder of one key's lock would fence the
// other's. A key or prefix with a backslash is refused before any I/O,
// and the other key's record is left alone.
func TestBackslashKeyRefused(t *testing.T) {
	p := prefix(t)
	s := newStore(t, azblobfence.WithPrefix(p))
	mustPut(t, s, "a/b", 5, "a/b's")
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
	wantRecord(t, s, "a/b", 5, "a/b's")
}
