package jsfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
)

// A key too long for the server's control line (4 KiB by default) is
// refused before any I/O. Sent, the server closes the connection: the
// call fails, every request then in flight on it is lost, and the
// connection stays closed for every other user of it.
func TestHugeKey(t *testing.T) {
	s := newStore(t)
	k := strings.Repeat("k", 5000)
	for name, err := range map[string]error{
		"Put":          s.Put(t.Context(), k, 1, []byte("v")),
		"Get":          second(s.Get(t.Context(), k)),
		"GetForUpdate": second(s.GetForUpdate(t.Context(), k, 1)),
		"Update":       s.Update(t.Context(), k, 1, func(fence.Record) ([]byte, error) { return nil, nil }),
	} {
		if !errors.Is(err, fence.ErrInvalidKey) {
			t.Errorf("%s of a %d-byte key: got %.200v, want an error matching ErrInvalidKey", name, len(k), err)
		}
	}
	mustPut(t, s, "k", 1, "v") // the connection still works
}

// A value over the server's max_payload (1 MiB by default) is refused by
// the client before it is sent: the error says the argument is bad
// (ErrInvalidArgument), not that the write's outcome is unknown, and the
// key keeps its record.
func TestValueTooLarge(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "k", 1, "a")
	big := []byte(strings.Repeat("v", 2<<20))
	for name, err := range map[string]error{
		"Put":    s.Put(t.Context(), "k", 2, big),
		"Update": s.Update(t.Context(), "k", 2, func(fence.Record) ([]byte, error) { return big, nil }),
	} {
		if !errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Errorf("%s of %d bytes: got %v, want an error matching ErrInvalidArgument alone", name, len(big), err)
		}
	}
	r, err := s.Get(t.Context(), "k")
	if err != nil || string(r.Value) != "a" {
		t.Fatalf("Get after: got %q, %v, want \"a\"", r.Value, err)
	}
}

// ProbeKey is CheckRevisions': a Store refuses it as a resource key.
// Taken as one, CheckRevisions (run by any process on the bucket) wrote
// a floor of token 1 over the record, and a stale token's Put landed.
func TestProbeKeyReserved(t *testing.T) {
	s := newStore(t)
	err := s.Put(t.Context(), jsfence.ProbeKey, 7, []byte("a"))
	if err == nil {
		if err := s.CheckRevisions(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(t.Context(), jsfence.ProbeKey, 2, []byte("stale")); err == nil {
			t.Errorf("Put(ProbeKey, 2) after Put(ProbeKey, 7) and CheckRevisions: landed")
		}
	}
	if !errors.Is(err, fence.ErrInvalidKey) {
		t.Fatalf("Put(ProbeKey, 7): got %v, want an error matching ErrInvalidKey", err)
	}
	if err := s.CheckRevisions(t.Context()); err != nil {
		t.Fatalf("CheckRevisions: got %v, want nil", err)
	}
}

// Another Store's ProbeKey is refused too: a Store with prefix "app-" probes
// the bucket's key "app-fencelock-probe", which a Store with no prefix
// names as resource "app-fencelock-probe".
func TestProbeKeyOfAnotherPrefix(t *testing.T) {
	kv, _ := bucket(t)
	s := mustNew(t, kv)
	k := "app-" + jsfence.ProbeKey
	err := s.Put(t.Context(), k, 7, []byte("a"))
	if err == nil {
		if err := mustNew(t, kv, jsfence.WithPrefix("app-")).CheckRevisions(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(t.Context(), k, 2, []byte("stale")); err == nil {
			t.Errorf("Put(%q, 2) after Put(%q, 7) and CheckRevisions with prefix \"app-\": landed", k, k)
		}
	}
	if !errors.Is(err, fence.ErrInvalidKey) {
		t.Fatalf("Put(%q, 7): got %v, want an error matching ErrInvalidKey", k, err)
	}
}
