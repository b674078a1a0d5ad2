package jsfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
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
