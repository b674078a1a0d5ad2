// Package fencewant holds what the adapters' tests share: a fresh key
// prefix, a Put that must land, a record to find, and the assertions about
// fence's error types, with one strictness: the error must match the
// sentinel and be the struct error, with the fields the test names.
//
// The conformance suite, fence/fencetest, keeps its own, laxer check: the
// contract lets an adapter leave StaleError.Current at 0 when it cannot tell,
// and fencetest must accept every adapter that keeps the contract.
package fencewant

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// Stale fails t unless err matches [fence.ErrStale] and is a
// *[fence.StaleError] with the given Token and Current (0: the adapter could
// not tell).
func Stale(t testing.TB, err error, token, current fence.Token) {
	t.Helper()
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) {
		t.Fatalf("got error %v, want a *fence.StaleError matching fence.ErrStale", err)
	}
	if se.Token != token || se.Current != current {
		t.Fatalf("StaleError: got token %d current %d, want token %d current %d", se.Token, se.Current, token, current)
	}
}

// Unknown fails t unless err matches [fence.ErrUnknownOutcome] and is a
// *[fence.UnknownOutcomeError] with the given Token, and matches neither
// [fence.ErrStale] nor any of notAlso (a package's own sentinels for definite
// failures).
func Unknown(t testing.TB, err error, token fence.Token, notAlso ...error) {
	t.Helper()
	var ue *fence.UnknownOutcomeError
	if !errors.Is(err, fence.ErrUnknownOutcome) || !errors.As(err, &ue) {
		t.Fatalf("got error %v, want a *fence.UnknownOutcomeError matching fence.ErrUnknownOutcome", err)
	}
	if ue.Token != token {
		t.Fatalf("UnknownOutcomeError.Token: got %d, want %d", ue.Token, token)
	}
	for _, other := range append([]error{fence.ErrStale}, notAlso...) {
		if errors.Is(err, other) {
			t.Fatalf("got %v, which matches %v too", err, other)
		}
	}
}

// Prefix returns a key prefix no other test or run uses: the test's name
// and random hex, under "fencelock-test/".
func Prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencelock-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "/" + hex.EncodeToString(b[:]) + "/"
}

// Put writes value under key with token to s, failing t unless it lands.
func Put(t testing.TB, s fence.Store, key string, token fence.Token, value string) {
	t.Helper()
	if err := s.Put(t.Context(), key, token, []byte(value)); err != nil {
		t.Fatalf("Put(%q, %d): got %v, want nil", key, token, err)
	}
}

// Record fails t unless s holds value with token under key.
func Record(t testing.TB, s fence.Store, key string, token fence.Token, value string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): got %v, want token %d %q", key, err, token, value)
	}
	if r.Token != token || string(r.Value) != value {
		t.Fatalf("Get(%q): got token %d %q, want token %d %q", key, r.Token, r.Value, token, value)
	}
}
