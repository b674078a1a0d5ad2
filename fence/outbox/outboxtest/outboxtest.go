// Package outboxtest is the conformance suite for outbox logs
// ([outbox.Log]): every store's adapter runs [Run] against its real
// server, as fence/fencetest does for fenced stores.
package outboxtest

import (
	"context"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// Harness is one fresh outbox on the store under test.
type Harness struct {
	// Log is the outbox's log.
	Log outbox.Log

	// Record makes one fenced write on the store, as a critical section
	// does: it claims c.Resource with c.Token (refused, with an error
	// matching fence.ErrStale, when a newer token has claimed it), writes
	// some state for it, and records effects in the same atomic write, so
	// that the effects exist if and only if the write landed. Every
	// effect's Resource and Token are c's.
	Record func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error

	// RecordUnfenced, optional, writes effects into the log as a store
	// recording them apart from its fenced write would: with plain writes
	// of the store's client, no claim and no condition, each effect as
	// Record would have stored it. The suite uses it as the control of
	// its safety cases: after a refused write has recorded nothing, the
	// same effect written this way is pending, so the case can see an
	// effect that landed. nil: the controls are not run.
	RecordUnfenced func(ctx context.Context, effects []outbox.Effect) error

	// MaxPayload is the largest payload the store records in one effect
	// (the suite checks that one byte more is refused with
	// outbox.ErrTooLarge), or 0 for none below 1 MiB.
	MaxPayload int
}

// Run runs the conformance cases against fresh harnesses from newHarness
// (one per case).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newHarness(t)) })
	}
}
