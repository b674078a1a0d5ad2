package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// rowVersion is what a write or a row lock changes in the header of the
// row of accounts whose id is id: a new version has a new ctid and xmin, a
// lock sets xmax.
func rowVersion(t *testing.T, db postgres.DB, id string) string {
	t.Helper()
	return tupleVersion(t, db, "SELECT ctid::text || ' ' || xmin::text || ' ' || xmax::text FROM accounts WHERE id = $1", id)
}

// tupleVersion is rowVersion of the row query (over $1, key) returns.
func tupleVersion(t *testing.T, db postgres.DB, query, key string) string {
	t.Helper()
	var v string
	err := db.QueryRow(t.Context(), query, key).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTableGetForUpdateRepeated: in autocommit, a holder's claim of a row
// it claimed already is a read, in one round trip, that writes nothing:
// the row's version (ctid, xmin, xmax) is the same after 100 of them,
// whereas the first claim made a new one (the control: the check sees a
// write). A stale token is still refused, leaving dest as it was, and a
// newer holder's claim between two reads is seen.
func TestTableGetForUpdateRepeated(t *testing.T) {
	dsn := pgtest.New(t).NewDatabase(t)
	pool, trips := countingPool(t, dsn)
	other, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	ctx := t.Context()
	mustExec(t, other, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)`)
	mustExec(t, other, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 4), ('warm', 0, 0)")
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	var b int64
	if err := tbl.GetForUpdate(ctx, pool, "warm", 7, []string{"balance"}, &b); err != nil {
		t.Fatal(err) // checks the schema and prepares the statement
	}
	before := rowVersion(t, other, "a")
	if err := tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
		t.Fatalf("first claim: got balance %d, error %v, want 120, nil", b, err)
	}
	claimed := rowVersion(t, other, "a")
	if claimed == before {
		t.Fatalf("control: the first claim left the row's version %q as it was, want a new one (a write)", claimed)
	}
	n := trips.Load()
	for i := range 100 {
		b = 0
		if err := tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
			t.Fatalf("repeated claim %d: got balance %d, error %v, want 120, nil", i, b, err)
		}
	}
	if got := trips.Load() - n; got != 100 {
		t.Errorf("100 repeated claims: got %d round trips, want 100", got)
	}
	if got := rowVersion(t, other, "a"); got != claimed {
		t.Errorf("100 repeated claims: the row's version went from %q to %q, want it unchanged (no write, no lock)", claimed, got)
	}
	b = -1
	fencewant.Stale(t, tbl.GetForUpdate(ctx, pool, "a", 5, []string{"balance"}, &b), 5, 7)
	if b != -1 {
		t.Errorf("a refused read: got balance %d scanned, want dest left as it was (-1)", b)
	}
	if err := tbl.GetForUpdate(ctx, other, "a", 9, nil); err != nil {
		t.Fatal(err)
	}
	fencewant.Stale(t, tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance"}, &b), 7, 9)
}

// TestTableGetForUpdateRepeatedInTx: in a transaction, a claim of a row
// whose fence is the token already still locks it to the transaction's end
// (another session's NOWAIT lock fails); the control, a plain SELECT in
// the transaction, leaves it free.
func TestTableGetForUpdateRepeatedInTx(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 7)")
	for _, tt := range []struct {
		name   string
		read   func(tx pgx.Tx) error
		locked bool
	}{
		{"GetForUpdate", func(tx pgx.Tx) error {
			var b int64
			return tbl.GetForUpdate(ctx, tx, "a", 7, []string{"balance"}, &b)
		}, true},
		{"control: plain SELECT", func(tx pgx.Tx) error {
			var b int64
			return tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 'a'").Scan(&b)
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if err := tt.read(tx); err != nil {
				t.Fatal(err)
			}
			_, err = pool.Exec(ctx, "SELECT FROM accounts WHERE id = 'a' FOR UPDATE NOWAIT")
			var pgErr *pgconn.PgError
			if locked := errors.As(err, &pgErr) && pgErr.Code == "55P03"; locked != tt.locked {
				t.Fatalf("another session's NOWAIT lock of the row: got %v, want it locked: %v", err, tt.locked)
			}
		})
	}
}

// TestTableGetForUpdateFirstClaimWaits: an autocommit first claim (the
// row's fence below the token) of a row that another transaction has
// written, uncommitted, with the same token or a newer one, waits for that
// transaction and reads what it committed (not the row its read found
// first), or is refused by the newer token.
func TestTableGetForUpdateFirstClaimWaits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		other fence.Token
		stale bool
	}{
		{"same token", 7, false},
		{"newer token", 9, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newAccounts(t)
			ctx := t.Context()
			mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 4)")
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if err := tbl.Update(ctx, tx, "a", tt.other, postgres.Set("balance", 50)); err != nil {
				t.Fatal(err)
			}
			var b int64
			errc := make(chan error, 1)
			go func() { errc <- tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance"}, &b) }()
			waitLockWaiters(t, pool, 1)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-errc
			if tt.stale {
				fencewant.Stale(t, err, 7, tt.other)
				return
			}
			if err != nil || b != 50 {
				t.Fatalf("GetForUpdate: got balance %d, error %v, want 50 (what the other transaction committed), nil", b, err)
			}
			wantAccount(t, pool, "a", 50, 7)
		})
	}
}

// TestStoreGetForUpdateRepeated: in autocommit, a Store's claim of a key
// whose floor is the token already is a read, in one round trip, that
// leaves the row's version as it was (the first claim made a new one: the
// control); so an Update by the holder of the floor writes once, its swap,
// not twice. A stale token is still refused.
func TestStoreGetForUpdateRepeated(t *testing.T) {
	pool, trips := countingPool(t, pgtest.New(t).NewDatabase(t))
	ctx := t.Context()
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	const versionSQL = "SELECT ctid::text || ' ' || xmin::text || ' ' || xmax::text FROM fencelock_store WHERE key = $1"
	for _, k := range []string{"warm", "k"} {
		if err := s.Put(ctx, k, 3, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Every statement prepared once, on another key.
	same := func(old fence.Record) ([]byte, error) { return old.Value, nil }
	if err := s.Update(ctx, "warm", 7, same); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, "warm", 7, same); err != nil {
		t.Fatal(err)
	}
	put := tupleVersion(t, pool, versionSQL, "k")
	if _, err := s.GetForUpdate(ctx, "k", 7); err != nil {
		t.Fatal(err)
	}
	before := tupleVersion(t, pool, versionSQL, "k")
	if before == put {
		t.Fatalf("control: the first claim left the row's version %q as it was, want a new one (a write)", before)
	}
	n := trips.Load()
	for i := range 100 {
		if r, err := s.GetForUpdate(ctx, "k", 7); err != nil || string(r.Value) != "v" || r.Token != 7 {
			t.Fatalf("repeated claim %d: got %+v, %v, want v with token 7", i, r, err)
		}
	}
	if got := trips.Load() - n; got != 100 {
		t.Errorf("100 repeated claims: got %d round trips, want 100", got)
	}
	if got := tupleVersion(t, pool, versionSQL, "k"); got != before {
		t.Errorf("100 repeated claims: the row's version went from %q to %q, want it unchanged (no write, no lock)", before, got)
	}
	fencewant.Stale(t, func() error { _, err := s.GetForUpdate(ctx, "k", 6); return err }(), 6, 7)
	n = trips.Load()
	if err := s.Update(ctx, "k", 7, func(old fence.Record) ([]byte, error) { return append(old.Value, '+'), nil }); err != nil {
		t.Fatal(err)
	}
	if got := trips.Load() - n; got != 2 {
		t.Errorf("Update by the floor's holder: got %d round trips, want 2 (the read and the swap)", got)
	}
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "v+" {
		t.Fatalf("after Update: got %+v, %v, want v+", r, err)
	}
}
