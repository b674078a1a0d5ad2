package s3fence_test

import (
	"encoding/binary"
	"testing"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
)

func mustPut(t *testing.T, s *s3fence.Store, k string, tok fence.Token, v string) {
	t.Helper()
	if err := s.Put(t.Context(), k, tok, []byte(v)); err != nil {
		t.Fatalf("Put(%q, token %d): got %v, want nil", k, tok, err)
	}
}

func mustGet(t *testing.T, s *s3fence.Store, k string) fence.Record {
	t.Helper()
	r, err := s.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%q): got %v, want nil", k, err)
	}
	return r
}

func wantRecord(t *testing.T, s *s3fence.Store, k string, tok fence.Token, v string) {
	t.Helper()
	if r := mustGet(t, s, k); r.Token != tok || string(r.Value) != v {
		t.Fatalf("Get(%q): got token %d value %q, want token %d value %q", k, r.Token, r.Value, tok, v)
	}
}

// enveloped builds, independently of the package, the bytes a Store writes
// for v under tok (with an all-zero write ID): the documented format.
func enveloped(tok fence.Token, v string) []byte {
	b := make([]byte, s3fence.HeaderSize, s3fence.HeaderSize+len(v))
	copy(b, "fencelk")
	b[7] = 1
	binary.BigEndian.PutUint64(b[8:16], uint64(tok))
	return append(b, v...)
}
