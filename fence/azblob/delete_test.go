package azblobfence_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Delete leaves a floor: the key reads as not found, a lower token's Put
// is refused, a higher one writes again, and a claim of the floor is a
// claim of a key with no value.
func TestDelete(t *testing.T) {
	s := newStore(t, azblobfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "k", 5, "a")
	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatalf("Delete(7): got %v, want nil", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	fencewant.Stale(t, s.Put(t.Context(), "k", 6, []byte("late")), 6, 7)
	fencewant.Stale(t, s.Delete(t.Context(), "k", 6), 6, 7)
	if _, err := s.GetForUpdate(t.Context(), "k", 8); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate(8) of the floor: got %v, want ErrNotFound", err)
	}
	fencewant.Stale(t, s.Put(t.Context(), "k", 7, []byte("late")), 7, 8)
	fencewant.Put(t, s, "k", 8, "b")
	fencewant.Record(t, s, "k", 8, "b")
}

// The blob's bytes are the value, as written, and its metadata the token:
// what the az CLI or a SAS URL reads.
func TestBlobIsTheValue(t *testing.T) {
	c := client(t)
	p := fencewant.Prefix(t)
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	fencewant.Put(t, s, "k", 34, "the value")
	r, err := c.NewBlobClient(s.Blob("k")).DownloadStream(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "the value" {
		t.Fatalf("the blob's bytes: got %q, want %q", b, "the value")
	}
	var token string
	for k, v := range r.Metadata {
		if strings.EqualFold(k, azblobfence.MetadataToken) && v != nil {
			token = *v
		}
	}
	if token != "34" {
		t.Fatalf("metadata %s: got %q, want 34 (metadata %v)", azblobfence.MetadataToken, token, r.Metadata)
	}
}
