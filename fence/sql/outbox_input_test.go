package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// noIOOutbox is noIO with the queries of several rows an Outbox reads.
type noIOOutbox struct{ noIO }

func (n noIOOutbox) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	n.t.Error("QueryContext called: want the call refused before any I/O")
	return nil, errors.New("no I/O")
}

// TestOutboxInvalidInput: bad input to an Outbox is an error of the
// ErrInvalidArgument family (outbox's ErrTooLarge, ErrNoDestination and
// ErrDuplicate among them), before any I/O, never a panic.
func TestOutboxInvalidInput(t *testing.T) {
	db := noIOOutbox{noIO{t}}
	var nilDB *sql.DB
	f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	o, err := sqlfence.NewOutbox(db, f, sqlfence.WithMaxPayload(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var nilCtx context.Context
	var zero sqlfence.Outbox
	ok := effect("r", 1, 0)
	by := fence.Claim{Resource: "dispatch", Token: 1}
	newOutbox := func(db sqlfence.OutboxDB, f *sqlfence.Fences, opts ...sqlfence.OutboxOption) func() error {
		return func() error { _, err := sqlfence.NewOutbox(db, f, opts...); return err }
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"NewOutbox: nil db", newOutbox(nil, f), sqlfence.ErrInvalidArgument},
		{"NewOutbox: typed nil db", newOutbox(nilDB, f), sqlfence.ErrInvalidArgument},
		{"NewOutbox: nil fences", newOutbox(db, nil), sqlfence.ErrInvalidArgument},
		{"NewOutbox: empty table", newOutbox(db, f, sqlfence.WithOutboxTable(nil)), sqlfence.ErrInvalidIdentifier},
		{"NewOutbox: empty table part", newOutbox(db, f, sqlfence.WithOutboxTable(sqlfence.Identifier{"s", ""})), sqlfence.ErrInvalidIdentifier},
		{"NewOutbox: table name too long", newOutbox(db, f, sqlfence.WithOutboxTable(sqlfence.Identifier{strings.Repeat("x", 65)})), sqlfence.ErrInvalidIdentifier},
		{"NewOutbox: max payload 0", newOutbox(db, f, sqlfence.WithMaxPayload(0)), sqlfence.ErrInvalidOption},
		{"NewOutbox: nil option", newOutbox(db, f, nil), sqlfence.ErrInvalidOption},
		{"zero Outbox: Pending", func() error { _, err := zero.Pending(ctx, outbox.All, nil, 1); return err }, sqlfence.ErrInvalidArgument},
		{"nil Outbox: Settle", func() error { return (*sqlfence.Outbox)(nil).Settle(ctx, by, nil) }, sqlfence.ErrInvalidArgument},
		{"Record: nil tx", func() error { return o.Record(ctx, nil, ok) }, sqlfence.ErrInvalidArgument},
		{"Pending: limit 0", func() error { _, err := o.Pending(ctx, outbox.All, nil, 0); return err }, sqlfence.ErrInvalidArgument},
		{"Pending: bad scope", func() error { _, err := o.Pending(ctx, outbox.Scope{Index: 2, Partitions: 2}, nil, 1); return err }, fence.ErrInvalidArgument},
		{"Pending: nil context", func() error { _, err := o.Pending(nilCtx, outbox.All, nil, 1); return err }, sqlfence.ErrInvalidArgument},
		{"Parked: limit -1", func() error { _, err := o.Parked(ctx, outbox.All, -1); return err }, sqlfence.ErrInvalidArgument},
		{"Check: bad scope", func() error { return o.Check(ctx, outbox.Scope{Index: -1, Partitions: 2}) }, fence.ErrInvalidArgument},
		{"Settle: empty resource", func() error { return o.Settle(ctx, fence.Claim{Token: 1}, nil) }, fence.ErrInvalidKey},
		{"Settle: token 0", func() error { return o.Settle(ctx, fence.Claim{Resource: "d"}, nil) }, fence.ErrInvalidToken},
		{"Settle: effect token 0", func() error { return o.Settle(ctx, by, []outbox.Settled{{Effect: effect("r", 0, 0)}}) }, fence.ErrInvalidToken},
		{"Settle: nil context", func() error { return o.Settle(nilCtx, by, nil) }, sqlfence.ErrInvalidArgument},
		{"Requeue: empty resource", func() error { return o.Requeue(ctx, effect("", 1, 0)) }, fence.ErrInvalidKey},
		{"Requeue: negative seq", func() error { return o.Requeue(ctx, effect("r", 1, -1)) }, sqlfence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want %v (matching fence.ErrInvalidArgument)", err, tt.want)
			}
		})
	}
}

// TestOutboxRecordInvalid: an invalid effect, a payload over the limit, or
// an effect twice in one call is refused before any I/O; the transaction,
// committed anyway, recorded nothing, not even the valid effects before
// it. The control, the payload at the limit, is recorded.
func TestOutboxRecordInvalid(t *testing.T) {
	srv := servers[2] // SQLite
	db, f, o := newOutbox(t, srv)
	ctx := t.Context()
	big := effect("r", 1, 1)
	big.Payload = make([]byte, sqlfence.DefaultMaxPayload+1)
	noDest := effect("r", 1, 1)
	noDest.Destination = ""
	tests := []struct {
		name string
		e    outbox.Effect
		want error
	}{
		{"too large", big, outbox.ErrTooLarge},
		{"no destination", noDest, outbox.ErrNoDestination},
		{"token 0", effect("r", 0, 1), fence.ErrInvalidToken},
		{"empty resource", effect("", 1, 1), fence.ErrInvalidKey},
		{"negative seq", effect("r", 1, -1), fence.ErrInvalidArgument},
		{"twice in one call", effect("r", 1, 0), outbox.ErrDuplicate},
	}
	for _, tt := range tests {
		err := f.RunInTx(ctx, db, "r", 1, func(tx *sql.Tx) error {
			if err := o.Record(ctx, tx, effect("r", 1, 0), tt.e); !errors.Is(err, tt.want) || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
			}
			return nil // commit: the refused call must have written nothing
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wantKeys(t, "pending after the refusals", pending(t, o))
	atLimit := effect("r", 1, 0)
	atLimit.Payload = make([]byte, sqlfence.DefaultMaxPayload)
	if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "r", Token: 1}, atLimit); err != nil {
		t.Fatalf("control, a payload at the limit: got %v, want nil", err)
	}
	es, err := o.Pending(ctx, outbox.All, nil, 10)
	if err != nil || len(es) != 1 || len(es[0].Payload) != sqlfence.DefaultMaxPayload {
		t.Fatalf("pending after the control: got %d effects, %v, want one of %d bytes", len(es), err, sqlfence.DefaultMaxPayload)
	}
}
