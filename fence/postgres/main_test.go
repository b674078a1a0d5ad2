package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

func mustExec(t *testing.T, db postgres.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: got error %v, want nil", sql, err)
	}
}

// newAccounts returns a pool on a fresh database holding the table
// accounts (id, balance, note, fence) and a fenced view of it.
func newAccounts(t *testing.T) (*pgxpool.Pool, *postgres.Table) {
	t.Helper()
	pool := pgtest.NewPool(t)
	mustExec(t, pool, `CREATE TABLE accounts (
		id text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, note text, fence bigint NOT NULL DEFAULT 0)`)
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatalf("NewTable: got error %v, want nil", err)
	}
	return pool, tbl
}

// account reads one row of accounts; ok is false when there is none.
func account(t *testing.T, db postgres.DB, id string) (balance, fenceTok int64, ok bool) {
	t.Helper()
	err := db.QueryRow(t.Context(), "SELECT balance, fence FROM accounts WHERE id = $1", id).Scan(&balance, &fenceTok)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatalf("reading account %q: %v", id, err)
	}
	return balance, fenceTok, true
}

func wantAccount(t *testing.T, db postgres.DB, id string, balance, fenceTok int64) {
	t.Helper()
	b, f, ok := account(t, db, id)
	if !ok || b != balance || f != fenceTok {
		t.Fatalf("account %q: got balance %d fence %d (exists %v), want balance %d fence %d", id, b, f, ok, balance, fenceTok)
	}
}

// wantPgCode checks that err reaches a *pgconn.PgError with the given code.
func wantPgCode(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Fatalf("got error %v, want one wrapping a *pgconn.PgError with SQLSTATE %s", err, code)
	}
}

// waitLockWaiters waits until n sessions of the current database wait on a
// lock.
func waitLockWaiters(t *testing.T, db postgres.DB, n int) {
	t.Helper()
	poll.Until(t, "sessions waiting on a lock", func() bool {
		var got int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		return err == nil && got >= n
	})
}

// noIO is a handle that fails the test if anything is sent through it.
type noIO struct{ t *testing.T }

func (n noIO) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	n.t.Error("Exec called: want the call refused before any I/O")
	return pgconn.CommandTag{}, errors.New("no I/O")
}

func (n noIO) QueryRow(context.Context, string, ...any) pgx.Row {
	n.t.Error("QueryRow called: want the call refused before any I/O")
	return errRow{}
}

func (n noIO) Begin(context.Context) (pgx.Tx, error) {
	n.t.Error("Begin called: want the call refused before any I/O")
	return nil, errors.New("no I/O")
}

type errRow struct{}

func (errRow) Scan(...any) error { return errors.New("no I/O") }

func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
