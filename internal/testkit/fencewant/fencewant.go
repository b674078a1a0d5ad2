// Package fencewant holds the assertions the adapters' tests share about
// fence's error types, with one strictness: the error must match the
// sentinel and be the struct error, with the fields the test names.
//
// The conformance suite, fence/fencetest, keeps its own, laxer check: the
// contract lets an adapter leave StaleError.Current at 0 when it cannot tell,
// and fencetest must accept every adapter that keeps the contract.
package fencewant

import (
	"errors"
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
