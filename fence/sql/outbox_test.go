package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// newOutbox returns a fresh database of srv with the default fence and
// outbox tables, and a state table the fenced writes of the tests write.
func newOutbox(t *testing.T, srv server) (*sql.DB, *sqlfence.Fences, *sqlfence.Outbox) {
	t.Helper()
	db := srv.open(t)
	if err := sqlfence.CreateOutboxSchema(t.Context(), db, srv.d); err != nil {
		t.Fatalf("CreateOutboxSchema: got error %v, want nil", err)
	}
	stateDDL := "CREATE TABLE state (resource TEXT NOT NULL, token BIGINT NOT NULL)"
	if srv.d == sqlfence.MySQL {
		stateDDL = "CREATE TABLE state (resource VARBINARY(767) NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB"
	}
	mustExec(t, db, stateDDL)
	f, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatalf("NewFences: got error %v, want nil", err)
	}
	o, err := sqlfence.NewOutbox(db, f)
	if err != nil {
		t.Fatalf("NewOutbox: got error %v, want nil", err)
	}
	return db, f, o
}

// record is a critical section's fenced write: it claims c, writes a row
// of state and records effects, in one fenced transaction.
func record(ctx context.Context, srv server, db *sql.DB, f *sqlfence.Fences, o *sqlfence.Outbox, c fence.Claim, effects ...outbox.Effect) error {
	return f.RunInTx(ctx, db, c.Resource, c.Token, func(tx *sql.Tx) error {
		q := "INSERT INTO state (resource, token) VALUES (" + ph(srv.d, 1) + ", " + ph(srv.d, 2) + ")"
		if _, err := tx.ExecContext(ctx, q, c.Resource, int64(c.Token)); err != nil {
			return err
		}
		return o.Record(ctx, tx, effects...)
	})
}

func TestOutboxConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
			db, f, o := newOutbox(t, srv)
			return outboxtest.Harness{
				Log: o,
				Record: func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
					return record(ctx, srv, db, f, o, c, effects...)
				},
				MaxPayload: sqlfence.DefaultMaxPayload,
			}
		})
	})
}

func effect(resource string, token fence.Token, seq int64) outbox.Effect {
	return outbox.Effect{Resource: resource, Token: token, Seq: seq, Destination: "mailer", Payload: []byte(resource + "!")}
}

func keys[E any](t *testing.T, es []E, err error, key func(E) string) []string {
	t.Helper()
	if err != nil {
		t.Fatalf("reading the outbox: got error %v, want nil", err)
	}
	out := []string{}
	for _, e := range es {
		out = append(out, key(e))
	}
	return out
}

// pending returns the keys of every pending effect, in order.
func pending(t *testing.T, o *sqlfence.Outbox, skip ...string) []string {
	t.Helper()
	es, err := o.Pending(t.Context(), outbox.All, skip, 100)
	return keys(t, es, err, outbox.Effect.Key)
}

func wantKeys(t *testing.T, what string, got []string, want ...outbox.Effect) {
	t.Helper()
	w := []string{}
	for _, e := range want {
		w = append(w, e.Key())
	}
	if !slices.Equal(got, w) {
		t.Fatalf("%s: got %v, want %v", what, got, w)
	}
}

// TestOutboxEffectOnlyWithItsWrite: an effect exists if and only if its
// fenced write committed. A stale holder's transaction is refused before
// its function runs, and a rolled-back one leaves no effect; the controls,
// the same writes by the current holder and committed, leave theirs.
func TestOutboxEffectOnlyWithItsWrite(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		first := effect("inv-1", 2, 0)
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "inv-1", Token: 2}, first); err != nil {
			t.Fatalf("record by token 2: got %v, want nil", err)
		}
		stale := effect("inv-1", 1, 0)
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "inv-1", Token: 1}, stale); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("record by stale token 1: got %v, want ErrStale", err)
		}
		boom := errors.New("boom")
		rolled := effect("inv-1", 2, 1)
		err := f.RunInTx(ctx, db, "inv-1", 2, func(tx *sql.Tx) error {
			if err := o.Record(ctx, tx, rolled); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("rolled-back write: got %v, want boom", err)
		}
		wantKeys(t, "pending after a stale and a rolled-back write", pending(t, o), first)
		// Controls: the same effects by the current holder, committed.
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "inv-1", Token: 2}, rolled); err != nil {
			t.Fatalf("control, committed: got %v, want nil", err)
		}
		newer := effect("inv-1", 3, 0)
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "inv-1", Token: 3}, newer); err != nil {
			t.Fatalf("control, newer token: got %v, want nil", err)
		}
		wantKeys(t, "pending after the controls", pending(t, o), first, rolled, newer)
	})
}

// TestOutboxRecordNotClaimed: the insert itself checks that the fence row
// holds the effect's resource at its token. An effect of a resource the
// transaction did not claim, or with another token than the one it
// claimed, is refused with ErrNotClaimed; the control, a transaction that
// claimed nothing recording an effect at its resource's current fence,
// lands, so the refusals come from that check.
func TestOutboxRecordNotClaimed(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		if err := f.Advance(ctx, db, "r", 5); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			e    outbox.Effect
		}{
			{"older token", effect("r", 4, 0)},
			{"newer token", effect("r", 6, 0)},
			{"unclaimed resource", effect("other", 5, 0)},
		}
		for _, c := range cases {
			err := f.RunInTx(ctx, db, "r", 5, func(tx *sql.Tx) error { return o.Record(ctx, tx, c.e) })
			if !errors.Is(err, sqlfence.ErrNotClaimed) || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("%s: got %v, want ErrNotClaimed", c.name, err)
			}
		}
		wantKeys(t, "pending after the refusals", pending(t, o))
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		ok := effect("r", 5, 0)
		if err := o.Record(ctx, tx, ok); err != nil {
			t.Fatalf("control, the fence's own token: got %v, want nil", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, "pending after the control", pending(t, o), ok)
	})
}

// TestOutboxDuplicate: an effect recorded twice (a retry after a write
// whose outcome was unknown) is refused with ErrDuplicate by the server,
// and its write rolls back; the first copy stays, once.
func TestOutboxDuplicate(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		c := fence.Claim{Resource: "r", Token: 1}
		e := effect("r", 1, 0)
		if err := record(ctx, srv, db, f, o, c, e); err != nil {
			t.Fatal(err)
		}
		if err := record(ctx, srv, db, f, o, c, effect("r", 1, 1), e); !errors.Is(err, outbox.ErrDuplicate) {
			t.Fatalf("recorded again: got %v, want ErrDuplicate", err)
		}
		wantKeys(t, "pending", pending(t, o), e)
	})
}
