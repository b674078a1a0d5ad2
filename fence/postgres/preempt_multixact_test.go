package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
)

// TestPreemptMultiXactXmaxKillsUnrelated: the look matches the claimed
// rows' xmax against pg_stat_activity.backend_xid as text. When several
// transactions lock a row (a holder's UPDATE and a foreign key check's FOR
// KEY SHARE from an INSERT into a table referencing it), xmax is a
// MultiXactId, from a number space of its own: the look then takes as
// blocker whichever session's transaction id equals that number. Here that
// is X, a live holder of row B (token 2) that has nothing to do with A:
// the waiter on A (token 9) reads X's tag, 2 < 9, and terminates X. (The
// test drives the MultiXact counter to X's xid; on a busy server with
// foreign keys the collision comes by itself, now and then.)
func TestPreemptMultiXactXmaxKillsUnrelated(t *testing.T) {
	pool, tbl := newBank(t)
	ctx := t.Context()
	mustExec(t, pool, "CREATE TABLE transfers (account_id text NOT NULL REFERENCES accounts (id))")
	mustExec(t, pool, "CREATE TABLE mx (i int PRIMARY KEY)")

	// X: live holder of B, its transaction open (tag t=2-2).
	xidCh := make(chan uint32, 1)
	releaseX, xDone := holdOpen(t, func(ctx context.Context, hold func()) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var b int64
			if err := tbl.GetForUpdate(ctx, tx, "B", 2, []string{"balance"}, &b); err != nil {
				return err
			}
			var xid uint32
			if err := tx.QueryRow(ctx, "SELECT backend_xid::text::bigint FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&xid); err != nil {
				return err
			}
			xidCh <- xid
			hold()
			return tbl.Update(ctx, tx, "B", 2, postgres.Add("balance", 1))
		})
	})
	x := <-xidCh

	// Drive the MultiXact counter so that the next one is x.
	lockTwice := func(n int) uint32 {
		t.Helper()
		mustExec(t, pool, "TRUNCATE mx")
		mustExec(t, pool, "INSERT INTO mx SELECT generate_series(1, $1::int)", n)
		t1, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer t1.Rollback(ctx)
		t2, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer t2.Rollback(ctx)
		if _, err := t1.Exec(ctx, "SELECT 1 FROM mx ORDER BY i FOR SHARE"); err != nil {
			t.Fatal(err)
		}
		// One subtransaction per row: a member set of its own, so a
		// MultiXact of its own (a backend reuses one for the same set).
		if _, err := t2.Exec(ctx, "DO $$ BEGIN FOR j IN 1.."+fmt.Sprint(n)+" LOOP BEGIN PERFORM 1 FROM mx WHERE mx.i = j FOR SHARE; EXCEPTION WHEN others THEN NULL; END; END LOOP; END $$"); err != nil {
			t.Fatal(err)
		}
		var m uint32
		if err := t1.QueryRow(ctx, "SELECT max(xmax::text::bigint) FROM mx").Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := lockTwice(1)
	if m >= x-1 {
		t.Fatalf("MultiXact counter %d already past X's xid %d", m, x)
	}
	if n := int(x - 1 - m); n > 0 {
		m = lockTwice(n)
	}
	if m != x-1 {
		t.Fatalf("could not place the MultiXact counter: %d, want %d", m, x-1)
	}

	// H: the older holder of A, frozen with A updated; K: an INSERT
	// referencing A, its FOR KEY SHARE making A's xmax MultiXact x.
	releaseH, hDone := holdOpen(t, func(ctx context.Context, hold func()) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := tbl.Update(ctx, tx, "A", 3, postgres.Add("balance", -100)); err != nil {
				return err
			}
			hold()
			return nil
		})
	})
	releaseK, _ := holdOpen(t, func(ctx context.Context, hold func()) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO transfers VALUES ('A')"); err != nil {
				return err
			}
			hold()
			return nil
		})
	})
	defer releaseK()
	var xmax string
	if err := pool.QueryRow(ctx, "SELECT xmax::text FROM accounts WHERE id = 'A'").Scan(&xmax); err != nil {
		t.Fatal(err)
	}
	if xmax != fmt.Sprint(x) {
		t.Fatalf("A's xmax is %s, want MultiXact %d", xmax, x)
	}
	t.Logf("A's xmax: MultiXact %s; X's xid: %d", xmax, x)

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	werr := tbl.Update(wctx, pool, "A", 9, postgres.Add("balance", -10))
	t.Logf("waiter on A: %v", werr)
	releaseH()
	_ = wait(t, hDone)
	releaseX()
	if xErr := wait(t, xDone); xErr != nil {
		t.Errorf("X, a live holder of B only: got %v, want its commit (the waiter on A matched A's MultiXact xmax to X's xid)", xErr)
	}
}
