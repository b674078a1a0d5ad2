package dynamofence_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/outbox"
)

// transactions makes f fault TransactWriteItems requests only.
func transactions(f *faults) *faults {
	f.Match = func(r *http.Request) bool {
		return strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems")
	}
	return f
}

// TestOutboxReplyLost: a recording write or a Settle whose reply is lost
// says so (ErrUnknownOutcome), sent once. The write landed: the retry of
// the recording is refused as a duplicate, and what the Settle marked
// stays marked.
func TestOutboxReplyLost(t *testing.T) {
	s, o := newOutbox(t)
	f := transactions(&faults{})
	fs, err := dynamofence.New(faultyClient(t, f), s.Table())
	if err != nil {
		t.Fatal(err)
	}
	fo, err := dynamofence.NewOutbox(fs, o.Table(), dynamofence.WithOutboxPrefix(o.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	a, b := effect("k", 1, 0), effect("k", 1, 1)
	f.LoseNextReply(func() {})
	err = record(fo)(ctx, fence.Claim{Resource: "k", Token: 1}, []outbox.Effect{a, b})
	if !errors.Is(err, fence.ErrUnknownOutcome) || f.Sent() != 1 {
		t.Fatalf("Update, reply lost: got %v after %d transactions, want ErrUnknownOutcome after 1", err, f.Sent())
	}
	if err := record(fo)(ctx, fence.Claim{Resource: "k", Token: 1}, []outbox.Effect{a, b}); !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("the retry: got %v, want ErrDuplicate", err)
	}
	wantPending(t, o, a, b)
	f.LoseNextReply(func() {})
	err = fo.Settle(ctx, fence.Claim{Resource: "d", Token: 3}, []outbox.Settled{{Effect: a, Attempts: 1}})
	if !errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Settle, reply lost: got %v, want ErrUnknownOutcome", err)
	}
	wantPending(t, o, b)
	if err := o.Settle(ctx, fence.Claim{Resource: "d", Token: 2}, nil); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Settle(2) after the lost Settle(3) landed: got %v, want ErrStale", err)
	}
}

// TestOutboxSettleManyReplyLost: a Settle of more effects than one
// transaction holds whose second transaction's reply is lost says so
// (ErrUnknownOutcome) and sends no third: the first two transactions'
// marks stay (the second landed), the rest stay pending. The same Settle
// again, as a dispatcher retries it, marks the rest and leaves the marks
// made: marking is idempotent.
func TestOutboxSettleManyReplyLost(t *testing.T) {
	s, o := newOutbox(t)
	done := recordMany(t, o)
	var n atomic.Int32
	f := &faults{Match: func(r *http.Request) bool {
		return strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") && n.Add(1) >= 2
	}}
	fs, err := dynamofence.New(faultyClient(t, f), s.Table())
	if err != nil {
		t.Fatal(err)
	}
	fo, err := dynamofence.NewOutbox(fs, o.Table(), dynamofence.WithOutboxPrefix(o.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	f.LoseNextReply(func() {})
	by := fence.Claim{Resource: "d", Token: 1}
	if err := fo.Settle(t.Context(), by, done); !errors.Is(err, fence.ErrUnknownOutcome) || n.Load() != 2 {
		t.Fatalf("Settle of 250, the second transaction's reply lost: got %v after %d transactions, want ErrUnknownOutcome after 2", err, n.Load())
	}
	chunk := dynamofence.MaxTxWrites - 1
	var rest []outbox.Effect
	for _, d := range done[2*chunk:] {
		rest = append(rest, d.Effect)
	}
	wantPending(t, o, rest...)
	if err := o.Settle(t.Context(), by, done); err != nil {
		t.Fatalf("Settle of 250 again: got %v, want nil", err)
	}
	wantPending(t, o)
}
