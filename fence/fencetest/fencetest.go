// Package fencetest is the conformance suite for [fence.Store] adapters.
//
// Every adapter in this module runs it against a real server:
//
//	func TestConformance(t *testing.T) {
//		fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t) })
//	}
//
// A new adapter passes when all subtests pass. The suite uses fresh keys in
// every subtest, so one store may serve all of them.
//
// A store that also implements [fence.AllUpdater] (a multi-key
// read-modify-write) is checked on it by the UpdateAll cases; their keys
// share a Redis hash tag ("{…}"), so they fall in one hash slot. A store
// without it passes those cases with nothing to check.
//
// [RunContention] is a separate, heavier case (large values, many writers at
// once) for stores whose compare-and-swap is the server's, such as S3's
// conditional PUT: it catches a check and a store that are not atomic.
//
// [RunIssuers] is another, for the stores that check the issuer of a
// write's token ([fence.IssuerNamer]): [fence.MemoryStore], and
// fence/postgres's Store with its issuer column.
package fencetest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// NewStore returns the store under test. It is called once per subtest and
// may return the same store each time; cleanup belongs in t.Cleanup.
type NewStore func(t *testing.T) fence.Store

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s fence.Store)
	}{
		{"FirstWriteAccepted", testFirstWrite},
		{"StaleRefusedAndNothingChanged", testStale},
		{"EqualTokenAccepted", testEqual},
		{"HigherTokenBecomesFloor", testHigher},
		{"GetMissing", testGetMissing},
		{"InvalidInput", testInvalidInput},
		{"CancelledContext", testCancelled},
		{"CancelledMidWrite", testCancelMidWrite},
		{"ConcurrentWriters", testConcurrent},
		{"ReadClaims", testReadClaims},
		{"ReadRecord", testReadRecord},
		{"ReadMissing", testReadMissing},
		{"ReadInvalidInput", testReadInvalidInput},
		{"UpdateCounter", testUpdateCounter},
		{"UpdateConcurrent", testUpdateConcurrent},
		{"UpdateLateWrite", testUpdateLateWrite},
		{"UpdateRefused", testUpdateRefused},
		{"UpdateContextEnds", testUpdateCtxEnds},
		{"UpdateInPlace", testUpdateInPlace},
		{"UpdateAllTransfer", testUpdateAllTransfer},
		{"UpdateAllRecords", testUpdateAllRecords},
		{"UpdateAllSameTokenBetween", testUpdateAllSameTokenBetween},
		{"UpdateAllConcurrent", testUpdateAllConcurrent},
		{"UpdateAllRefused", testUpdateAllRefused},
		{"UpdateAllInvalidInput", testUpdateAllInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newStore(t))
		})
	}
}

// key returns a key no other subtest or run uses.
func key(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return "fencetest/" + name + "/" + hex.EncodeToString(b[:])
}

// value encodes the token into the value so that a read can check the two
// belong together.
func value(tok fence.Token, seq int) []byte {
	return fmt.Appendf(nil, "token=%d seq=%d", tok, seq)
}

func tokenOf(v []byte) (fence.Token, bool) {
	var tok fence.Token
	var seq int
	_, err := fmt.Sscanf(string(v), "token=%d seq=%d", &tok, &seq)
	return tok, err == nil
}

func put(t *testing.T, s fence.Store, k string, tok fence.Token, seq int) error {
	t.Helper()
	return s.Put(t.Context(), k, tok, value(tok, seq))
}

func mustPut(t *testing.T, s fence.Store, k string, tok fence.Token, seq int) {
	t.Helper()
	if err := put(t, s, k, tok, seq); err != nil {
		t.Fatalf("Put(%q, token %d): got error %v, want nil", k, tok, err)
	}
}

func mustGet(t *testing.T, s fence.Store, k string) fence.Record {
	t.Helper()
	r, err := s.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%q): got error %v, want nil", k, err)
	}
	return r
}

func wantRecord(t *testing.T, s fence.Store, k string, tok fence.Token, seq int) {
	t.Helper()
	r := mustGet(t, s, k)
	if r.Token != tok || string(r.Value) != string(value(tok, seq)) {
		t.Fatalf("Get(%q): got token %d value %q, want token %d value %q", k, r.Token, r.Value, tok, value(tok, seq))
	}
}

// wantStale is laxer than the adapters' own tests (internal/testkit/fencewant): the
// contract lets an adapter leave StaleError.Current at 0 when it cannot tell.
func wantStale(t *testing.T, err error, tok, current fence.Token) {
	t.Helper()
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put with token %d: got error %v, want one matching fence.ErrStale", tok, err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("Put with token %d: got %T, want errors.As to find *fence.StaleError", tok, err)
	}
	if se.Token != tok {
		t.Errorf("StaleError.Token: got %d, want %d", se.Token, tok)
	}
	if se.Current != 0 && se.Current != current {
		t.Errorf("StaleError.Current: got %d, want %d (or 0 for unknown)", se.Current, current)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf("fencetest: "+format, args...) }
