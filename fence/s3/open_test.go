package s3fence_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// TestOpen: Open streams the value, envelope stripped, with its token and
// size; a tombstone and a missing key are not found.
func TestOpen(t *testing.T) {
	s, k := newStore(t), key(t)
	value := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if err := s.Put(t.Context(), k, 9, value); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(t.Context(), k)
	if err != nil {
		t.Fatalf("Open: got %v, want nil", err)
	}
	got, err := io.ReadAll(r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil || !bytes.Equal(got, value) || r.Token() != 9 || r.Size() != int64(len(value)) {
		t.Fatalf("Open: read %d bytes (equal %v), token %d, size %d, error %v; want the %d-byte value, token 9",
			len(got), bytes.Equal(got, value), r.Token(), r.Size(), err, len(value))
	}
	if err := s.Delete(t.Context(), k, 10); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k, k + "-missing"} {
		if r, err := s.Open(t.Context(), key); !errors.Is(err, fence.ErrNotFound) {
			t.Errorf("Open(%q): got %v, %v, want fence.ErrNotFound", key, r, err)
		}
	}
}
