package sqlcbank_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	sqlcbank "github.com/fencelock/fencelock/docs/sqlc"
	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// proxiedConn returns a connection to pool's database through a proxy
// that can hold the server's replies. It keeps pgx's default query mode,
// sqlc users' too: a statement's first run prepares it, a round trip
// before the one that runs it.
func proxiedConn(t *testing.T, pool *pgxpool.Pool) (*pgx.Conn, *netproxy.Proxy) {
	t.Helper()
	cfg := pool.Config().ConnConfig.Copy()
	var p *netproxy.Proxy
	p, cfg.Host, cfg.Port = netproxy.For(t, cfg.Host, cfg.Port)
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn, p
}

// balanceIs reports whether account id holds balance, read on pool.
func balanceIs(t *testing.T, pool *pgxpool.Pool, id string, balance int64) func() bool {
	return func() bool {
		a, err := db.New(pool).GetAccount(t.Context(), id)
		return err == nil && a.Balance == balance
	}
}

// TestLostReply: a fenced write the server applied, whose answer is lost,
// is fence.ErrUnknownOutcome, and it did land. The control makes the same
// call on the generated code alone: its error matches neither
// fence.ErrUnknownOutcome nor anything that says the write may have
// landed, and a caller that took it for "not written" would be wrong.
func TestLostReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, q *db.Queries) error
	}{
		{"SetBalance", func(ctx context.Context, q *db.Queries) error {
			return sqlcbank.SetBalance(ctx, q, 7, "acct-A", 500)
		}},
		{"generated code alone (control)", func(ctx context.Context, q *db.Queries) error {
			_, err := q.SetBalanceFenced(ctx, db.SetBalanceFencedParams{ID: "acct-A", Balance: 500, Token: 7})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newBank(t)
			mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
			conn, p := proxiedConn(t, pool)
			q := db.New(conn)
			if err := tc.write(t.Context(), q); err != nil { // prepares the statement
				t.Fatalf("first write: got %v, want nil", err)
			}
			mustExec(t, pool, "UPDATE accounts SET balance = 1000")
			done := p.LoseReplies(t, "the write to land", balanceIs(t, pool, "acct-A", 500))
			err := tc.write(t.Context(), q)
			<-done
			wantAccount(t, pool, "acct-A", 500, 7)
			if tc.name == "SetBalance" {
				fencewant.Unknown(t, err, 7)
				return
			}
			if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("control: got %v, want an error not matching fence.ErrUnknownOutcome", err)
			}
			t.Logf("control: the generated code's error: %v", err)
		})
	}
}

// hooked is a *pgx.Conn whose transactions call beforeExec before each
// Exec and beforeCommit before the COMMIT.
type hooked struct {
	*pgx.Conn
	beforeExec, beforeCommit func()
}

func (c hooked) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := c.Conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return hookedTx{Tx: tx, c: c}, nil
}

type hookedTx struct {
	pgx.Tx
	c hooked
}

func (tx hookedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if tx.c.beforeExec != nil {
		tx.c.beforeExec()
	}
	return tx.Tx.Exec(ctx, sql, args...)
}

func (tx hookedTx) Commit(ctx context.Context) error {
	if tx.c.beforeCommit != nil {
		tx.c.beforeCommit()
	}
	return tx.Tx.Commit(ctx)
}

// TestWithdrawLostReply: in Withdraw's transaction a statement whose
// answer is lost is a known failure (the transaction never commits:
// nothing written), and only a lost answer to the COMMIT, which did
// commit, is fence.ErrUnknownOutcome.
func TestWithdrawLostReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool // lose the COMMIT's answer, not the write's
	}{
		{"write", false},
		{"commit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newBank(t)
			mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
			conn, p := proxiedConn(t, pool)
			if err := sqlcbank.Withdraw(t.Context(), conn, 7, "acct-A", 100); err != nil { // prepares the statements
				t.Fatalf("first withdraw: got %v, want nil", err)
			}
			h := hooked{Conn: conn}
			var done <-chan struct{}
			if tc.commit {
				h.beforeCommit = func() {
					done = p.LoseReplies(t, "the commit", balanceIs(t, pool, "acct-A", 800))
				}
			} else {
				h.beforeExec = func() {
					done = p.LoseReplies(t, "the write to run in the transaction", func() bool {
						var n int
						err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE '%SetBalanceFenced%'").Scan(&n)
						return err == nil && n == 1
					})
				}
			}
			err := sqlcbank.Withdraw(t.Context(), h, 7, "acct-A", 100)
			<-done
			if tc.commit {
				fencewant.Unknown(t, err, 7)
				wantAccount(t, pool, "acct-A", 800, 7)
				return
			}
			if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("got %v, want a failure not matching fence.ErrUnknownOutcome", err)
			}
			poll.Until(t, "the transaction to end", func() bool {
				var n int
				err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'").Scan(&n)
				return err == nil && n == 0
			})
			wantAccount(t, pool, "acct-A", 900, 7)
		})
	}
}
