package postgres_test

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/pgtag"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestTagMergeMatchesSQL: the tag this package's claims compute in the
// client (pgtag.Merge, from the application_name the server reports) is
// the one the server computes with pgtag.SQL (fence/sql's), whatever the
// application_name before the claim: none of ours, a tag with entries,
// with none, with "+", one an entry no longer fits in.
func TestTagMergeMatchesSQL(t *testing.T) {
	pool := pgtest.NewPool(t)
	e := pgtag.Entry
	before := []string{
		"", "psql", "fencelock:t=3", "fencelock:t=x-7;" + e("A", 3),
		"fencelock:t=3-7", "fencelock:t=3-7;", "fencelock:t=3-7;" + e("A", 3), "fencelock:t=3-7;+",
		"fencelock:t=3-7;" + e("A", 3) + ";" + e("B", 7) + ";" + e("C", 5),
		"fencelock:t=1000000000-1000000004;" + e("A", 1000000000) + ";" + e("B", 1000000004),
	}
	claims := []struct {
		lo, hi  int64
		entries string
	}{
		{5, 5, e("D", 5)},
		{1, 9, e("D", 1) + ";" + e("E", 9)},
		{1000000005, 1000000005, e("F", 1000000005)},
	}
	sql := "SELECT " + pgtag.SQL("$1::bigint", "$2::bigint", "$3::text")
	for _, cur := range before {
		for _, c := range claims {
			var got, reported string
			err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(t.Context(), "SELECT set_config('application_name', $1, true)", cur); err != nil {
					return err
				}
				// What the claim computes from: the name as the server
				// keeps it (63 bytes at most) and reports it.
				reported = tx.Conn().PgConn().ParameterStatus("application_name")
				return tx.QueryRow(t.Context(), sql, c.lo, c.hi, c.entries).Scan(&got)
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := pgtag.Merge(reported, c.lo, c.hi, c.entries); got != want {
				t.Errorf("application_name %q (reported %q), claim %d-%d %q: pgtag.SQL gives %q, pgtag.Merge %q",
					cur, reported, c.lo, c.hi, c.entries, got, want)
			}
		}
	}
}

// TestTagClaimAgain: a claim of a row the transaction claimed already with
// the same token (the write after GetForUpdate) leaves its tag as it was,
// rather than naming the row twice; a claim of another row, or with
// another token, adds to it.
func TestTagClaimAgain(t *testing.T) {
	pool, tbl := newBank(t)
	var names []string
	err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		var bal int64
		for _, claim := range []func() error{
			func() error { return tbl.GetForUpdate(t.Context(), tx, "A", 7, []string{"balance"}, &bal) },
			func() error { return tbl.Update(t.Context(), tx, "A", 7, postgres.Add("balance", -1)) },
			func() error { return tbl.Update(t.Context(), tx, "B", 7, postgres.Add("balance", 1)) },
			func() error { return tbl.Update(t.Context(), tx, "A", 8, postgres.Add("balance", 1)) },
		} {
			if err := claim(); err != nil {
				return err
			}
			var name string
			if err := tx.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&name); err != nil {
				return err
			}
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a7, b7, a8 := pgtag.Entry("accounts/A", 7), pgtag.Entry("accounts/B", 7), pgtag.Entry("accounts/A", 8)
	want := []string{"fencelock:t=7-7;" + a7, "fencelock:t=7-7;" + a7, "fencelock:t=7-7;" + a7 + ";" + b7, "fencelock:t=7-8;" + a7 + ";" + b7 + ";" + a8}
	if !slices.Equal(names, want) {
		t.Fatalf("application_name after each claim: got %q, want %q", names, want)
	}
}

// TestTagUnreportedNewerHolderSpared: a live holder X whose connection
// goes through a pooler that does not pass the server's reports of
// application_name on (ParameterStatus) claims A with token 9, then B with
// 5, in one transaction, in each way a transaction claims with two
// tokens. X's client merges each tag into the name it last heard, the
// name before the transaction: the server checks that name against its
// own, and merges itself when they differ, so the tag keeps A at 9. A
// stale attempt on A with token 7, which X blocks, leaves X alone and
// gets no write in. The control runs X with no pooler in between.
func TestTagUnreportedNewerHolderSpared(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name string
		run  func(ctx context.Context, db *pgxpool.Pool, tbl *postgres.Table, hold func()) error
	}{
		{"nested RunInTx", func(ctx context.Context, db *pgxpool.Pool, _ *postgres.Table, hold func()) error {
			return postgres.RunInTx(ctx, db, "A", 9, func(tx pgx.Tx) error {
				if err := postgres.RunInTx(ctx, tx, "B", 5, func(pgx.Tx) error { return nil }); err != nil {
					return err
				}
				hold()
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
		{"RunInTxAll with two tokens", func(ctx context.Context, db *pgxpool.Pool, _ *postgres.Table, hold func()) error {
			return postgres.RunInTxAll(ctx, db, claims("A", 9), func(tx pgx.Tx) error {
				if err := postgres.RunInTxAll(ctx, tx, claims("B", 5), func(pgx.Tx) error { return nil }); err != nil {
					return err
				}
				hold()
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
		{"Exec in RunInTx", func(ctx context.Context, db *pgxpool.Pool, _ *postgres.Table, hold func()) error {
			return postgres.RunInTx(ctx, db, "A", 9, func(tx pgx.Tx) error {
				if _, err := postgres.Exec(ctx, tx, "B", 5, "UPDATE accounts SET balance = balance + 1 WHERE id = 'B'"); err != nil {
					return err
				}
				hold()
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
	}
	for _, w := range ways {
		for _, pooled := range []bool{true, false} {
			t.Run(w.name+map[bool]string{true: " behind the pooler", false: " (control: no pooler)"}[pooled], func(t *testing.T) {
				t.Parallel()
				pool, tbl := newBank(t)
				db := pool
				if pooled {
					db = unreportedPool(t, pool)
				}
				release, xDone := holdOpen(t, func(ctx context.Context, hold func()) error { return w.run(ctx, db, tbl, hold) })
				_, staleErr := next(t, pool, claims("A", 7), time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
					return postgres.RunInTx(ctx, pool, "A", 7, fn, postgres.WithPreemptAfter(50*time.Millisecond))
				})
				release()
				if err := wait(t, xDone); err != nil {
					t.Errorf("live holder X (A at 9, the newest): got %v, want its commit: a stale attempt (A at 7) ended it", err)
				}
				if staleErr == nil {
					t.Errorf("stale attempt (A at 7, X holds A at 9): got nil, its write committed; want ErrStale (or its deadline)")
				}
			})
		}
	}
}

// unreportedPool is a pool of pool's server through a pooler that keeps
// the server's reports of application_name after the connection's start
// from the client.
func unreportedPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	started := false
	var mu sync.Mutex
	addr := msgProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), func(typ byte, body []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if typ == 'Z' {
			started = true // the pool's one connection has started
		}
		return !(started && typ == 'S' && bytes.HasPrefix(body, []byte("application_name\x00")))
	})
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.MaxConns = 1
	proxied, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxied.Close)
	return proxied
}
