package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
	"github.com/fencelock/fencelock/fence/postgres"
)

// newOutbox returns a pool on a fresh database holding the accounts table
// (newAccounts), the fence table and an outbox.
func newOutbox(t *testing.T) (*pgxpool.Pool, *postgres.Outbox) {
	t.Helper()
	pool, _ := newAccounts(t)
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		t.Fatalf("NewOutbox: got error %v, want nil", err)
	}
	if err := ob.CreateTable(t.Context()); err != nil {
		t.Fatalf("CreateTable: got error %v, want nil", err)
	}
	return pool, ob
}

// credit adds 1 to the balance of the account c.Resource, creating it.
func credit(ctx context.Context, tx pgx.Tx, resource string) error {
	_, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) VALUES ($1, 1)
		ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + 1`, resource)
	return err
}

// recordFenced is a critical section's write: a fenced transaction on
// c.Resource that credits its account and records effects.
func recordFenced(pool *pgxpool.Pool, ob *postgres.Outbox) func(context.Context, fence.Claim, []outbox.Effect) error {
	return func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
		return postgres.RunInTx(ctx, pool, c.Resource, c.Token, func(tx pgx.Tx) error {
			if err := credit(ctx, tx, c.Resource); err != nil {
				return err
			}
			return ob.Record(ctx, tx, effects...)
		})
	}
}

func TestOutboxConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		pool, ob := newOutbox(t)
		return outboxtest.Harness{Log: ob, Record: recordFenced(pool, ob), MaxPayload: postgres.MaxOutboxPayload}
	})
}

func effect(resource string, token fence.Token, seq int64) outbox.Effect {
	return outbox.Effect{Resource: resource, Token: token, Seq: seq, Destination: "mail", Payload: []byte("hi")}
}

// pendingKeys returns the keys of every pending effect.
func pendingKeys(t *testing.T, ob *postgres.Outbox) []string {
	t.Helper()
	es, err := ob.Pending(t.Context(), outbox.All, nil, 1000)
	if err != nil {
		t.Fatalf("Pending: got error %v, want nil", err)
	}
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.Key()
	}
	return keys
}

func wantPending(t *testing.T, ob *postgres.Outbox, want ...outbox.Effect) {
	t.Helper()
	got := pendingKeys(t, ob)
	keys := make([]string, len(want))
	for i, e := range want {
		keys[i] = e.Key()
	}
	if len(got) != len(keys) {
		t.Fatalf("pending: got %v, want %v", got, keys)
	}
	for i := range got {
		if got[i] != keys[i] {
			t.Fatalf("pending: got %v, want %v", got, keys)
		}
	}
}

// claimEmpty runs an empty fenced transaction: resource's fence is token.
func claimEmpty(t *testing.T, pool *pgxpool.Pool, resource string, token fence.Token) {
	t.Helper()
	if err := postgres.RunInTx(t.Context(), pool, resource, token, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("claiming %s with %d: got error %v, want nil", resource, token, err)
	}
}

var errBoom = errors.New("boom")

// TestOutboxRecordRolledBack: an effect recorded in a fenced transaction
// that rolls back does not exist. Control: recorded in a transaction of
// its own, beside the one that rolls back, it lands.
func TestOutboxRecordRolledBack(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	claimEmpty(t, pool, "acct", 1)
	err := postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
		if err := credit(ctx, tx, "acct"); err != nil {
			return err
		}
		if err := ob.Record(ctx, tx, effect("acct", 1, 0)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("RunInTx: got error %v, want %v", err, errBoom)
	}
	wantPending(t, ob)

	// Control: the effect in a transaction of its own lands though the
	// state change is rolled back.
	outside := effect("acct", 1, 1)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Record(ctx, tx, outside) }); err != nil {
		t.Fatalf("Record outside the fenced transaction: got error %v, want nil", err)
	}
	err = postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
		if err := credit(ctx, tx, "acct"); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("RunInTx: got error %v, want %v", err, errBoom)
	}
	if _, _, ok := account(t, pool, "acct"); ok {
		t.Fatal("account acct exists, want the credits rolled back")
	}
	wantPending(t, ob, outside)
}

// TestOutboxRecordStale: a stale holder's fenced transaction is refused
// and records nothing; its effect recorded in an unfenced transaction is
// refused by Record's own check (ErrStale), and one for a resource not
// claimed with its token by ErrNotClaimed. Control: the current token's
// effect in the same unfenced transaction lands.
func TestOutboxRecordStale(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	claimEmpty(t, pool, "acct", 1)
	claimEmpty(t, pool, "acct", 2)
	err := recordFenced(pool, ob)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{effect("acct", 1, 0)})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale RunInTx: got error %v, want fence.ErrStale", err)
	}
	wantPending(t, ob)

	plain := func(e outbox.Effect) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Record(ctx, tx, e) })
	}
	var stale *fence.StaleError
	if err := plain(effect("acct", 1, 0)); !errors.As(err, &stale) || stale.Current != 2 || stale.Token != 1 {
		t.Fatalf("Record with token 1 under fence 2: got error %v, want a *fence.StaleError with Token 1, Current 2", err)
	}
	for _, e := range []outbox.Effect{effect("other", 1, 0), effect("acct", 3, 0)} {
		if err := plain(e); !errors.Is(err, postgres.ErrNotClaimed) {
			t.Fatalf("Record %s on %s unclaimed: got error %v, want ErrNotClaimed", e.Key(), e.Resource, err)
		}
	}
	// A write with several effects records none when one is refused.
	if err := plain2(ctx, pool, ob, effect("acct", 2, 5), effect("acct", 1, 5)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Record of a current and a stale effect: got error %v, want fence.ErrStale", err)
	}
	wantPending(t, ob)

	current := effect("acct", 2, 0)
	if err := plain(current); err != nil {
		t.Fatalf("Record with the current token: got error %v, want nil", err)
	}
	wantPending(t, ob, current)
	if err := plain(current); !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("Record of the same effect again: got error %v, want outbox.ErrDuplicate", err)
	}
	wantPending(t, ob, current)
}

func plain2(ctx context.Context, pool *pgxpool.Pool, ob *postgres.Outbox, es ...outbox.Effect) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Record(ctx, tx, es...) })
}

// TestOutboxSettleStale: a deposed dispatcher's Settle marks nothing.
// Control: the current dispatcher's marks, and a second Settle of the same
// effect passes over it.
func TestOutboxSettleStale(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	e := effect("acct", 1, 0)
	if err := recordFenced(pool, ob)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{e}); err != nil {
		t.Fatalf("recording: got error %v, want nil", err)
	}
	d1 := fence.Claim{Resource: "dispatcher", Token: 1}
	d2 := fence.Claim{Resource: "dispatcher", Token: 2}
	for _, d := range []fence.Claim{d1, d2} {
		if err := ob.Settle(ctx, d, nil); err != nil {
			t.Fatalf("Settle(%d, none): got error %v, want nil", d.Token, err)
		}
	}
	done := []outbox.Settled{{Effect: e, Attempts: 1}}
	if err := ob.Settle(ctx, d1, done); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Settle by the deposed dispatcher: got error %v, want fence.ErrStale", err)
	}
	wantPending(t, ob, e)
	for range 2 {
		if err := ob.Settle(ctx, d2, done); err != nil {
			t.Fatalf("Settle by the current dispatcher: got error %v, want nil", err)
		}
	}
	wantPending(t, ob)
	var by int64
	var attempts int32
	if err := pool.QueryRow(ctx, "SELECT delivered_by, attempts FROM fencelock_outbox").Scan(&by, &attempts); err != nil || by != 2 || attempts != 1 {
		t.Fatalf("settled row: got delivered_by %d, attempts %d (error %v), want 2, 1", by, attempts, err)
	}
}

// TestOutboxParkedRequeue: a parked effect is listed by Parked, not
// Pending, until Requeue makes it pending again.
func TestOutboxParkedRequeue(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	e, f := effect("acct", 1, 0), effect("acct", 1, 1)
	if err := recordFenced(pool, ob)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{e, f}); err != nil {
		t.Fatalf("recording: got error %v, want nil", err)
	}
	d := fence.Claim{Resource: "dispatcher", Token: 1}
	if err := ob.Settle(ctx, d, []outbox.Settled{{Effect: e, Parked: "410 Gone", Attempts: 3}}); err != nil {
		t.Fatalf("Settle: got error %v, want nil", err)
	}
	wantPending(t, ob, f)
	parked, err := ob.Parked(ctx, outbox.All, 10)
	if err != nil || len(parked) != 1 || parked[0].Effect.Key() != e.Key() || parked[0].Reason != "410 Gone" || parked[0].Attempts != 3 {
		t.Fatalf("Parked: got %+v (error %v), want %s parked for 410 Gone after 3 attempts", parked, err, e.Key())
	}
	if err := ob.Requeue(ctx, e); err != nil {
		t.Fatalf("Requeue: got error %v, want nil", err)
	}
	wantPending(t, ob, e, f)
	if err := ob.Requeue(ctx, e); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Requeue of a pending effect: got error %v, want fence.ErrNotFound", err)
	}
}
