package sqlfence_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// proxiedPostgres returns two handles, through pgx's database/sql driver,
// on one fresh PostgreSQL database: direct, and through a proxy that can
// hold and break the connection. The proxied pool keeps one connection,
// and sends each statement in one round trip (the simple protocol), so
// that the reply the proxy holds is the statement's own.
func proxiedPostgres(t *testing.T) (direct, viaProxy *sql.DB, p *netproxy.Proxy) {
	t.Helper()
	dsn := pgtest.New(t).NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, cfg.Host, cfg.Port = netproxy.For(t, cfg.Host, cfg.Port)
	cfg.Fallbacks = nil
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	direct, err = sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	// No ping before reuse (pgx pings a connection idle for over a
	// second): the ping's reply would be the one held.
	viaProxy = stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	viaProxy.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = viaProxy.Close() })
	return direct, viaProxy, p
}

// TestWriteAnswerLostPostgreSQL: on PostgreSQL through pgx's database/sql
// driver, a fenced write on a *sql.DB that the server applies while its
// answer is lost is an unknown outcome, applied once. pgx reports the lost
// answer as "conn closed", safe to retry, so its driver returns
// driver.ErrBadConn, and a *sql.DB answers that by sending the statement
// again on a new connection: the control, the same UPDATE sent by
// database/sql itself, adds 70 twice and returns nil. A Table's Add and a
// Store's Update (whose second copy, finding its own value, read as a
// change, would have run fn again) must not.
func TestWriteAnswerLostPostgreSQL(t *testing.T) {
	balance := func(db *sql.DB) int64 {
		var b int64
		if err := db.QueryRowContext(context.Background(), "SELECT balance FROM accounts WHERE id = 'k'").Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	setup := func(t *testing.T) (*sql.DB, *sql.DB, *netproxy.Proxy) {
		direct, viaProxy, p := proxiedPostgres(t)
		mustExec(t, direct, accountsDDL(sqlfence.PostgreSQL))
		mustExec(t, direct, "INSERT INTO accounts (id, balance, fence) VALUES ('k', 0, 1)")
		return direct, viaProxy, p
	}

	t.Run("control: database/sql sends it again", func(t *testing.T) {
		direct, viaProxy, p := setup(t)
		mustExec(t, viaProxy, "SELECT 1") // the pool's connection, open
		lost := p.LoseReplies(t, "the write to be applied", func() bool { return balance(direct) == 70 })
		_, err := viaProxy.ExecContext(t.Context(), "UPDATE accounts SET balance = balance + 70 WHERE id = 'k'")
		<-lost
		if got := balance(direct); err != nil || got != 140 {
			t.Fatalf("got error %v and balance %d, want nil and 140 (the UPDATE sent twice)", err, got)
		}
	})

	t.Run("Table.Update with Add", func(t *testing.T) {
		direct, viaProxy, p := setup(t)
		tbl, err := sqlfence.NewTable(sqlfence.PostgreSQL, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tbl.Update(t.Context(), viaProxy, "k", 2, sqlfence.Add("balance", 0)); err != nil {
			t.Fatal(err) // the Table's first use, and the connection, before the fault
		}
		lost := p.LoseReplies(t, "the write to be applied", func() bool { return balance(direct) == 70 })
		err = tbl.Update(t.Context(), viaProxy, "k", 2, sqlfence.Add("balance", 70))
		<-lost
		if got := balance(direct); got != 70 {
			t.Fatalf("balance %d, want 70: the update was applied %d times (error %v)", got, got/70, err)
		}
		fencewant.Unknown(t, err, 2)
	})

	t.Run("Store.Update", func(t *testing.T) {
		direct, viaProxy, p := setup(t)
		mustExec(t, direct, "CREATE TABLE fencelock_store (key TEXT PRIMARY KEY, token BIGINT NOT NULL, value BYTEA)")
		s, err := sqlfence.NewStore(viaProxy, sqlfence.PostgreSQL, sqlfence.Identifier{"fencelock_store"})
		if err != nil {
			t.Fatal(err)
		}
		counter := func(r fence.Record) int64 {
			if len(r.Value) < 8 {
				return 0
			}
			return int64(binary.BigEndian.Uint64(r.Value))
		}
		stored := func() int64 {
			var v []byte
			if err := direct.QueryRowContext(context.Background(), "SELECT value FROM fencelock_store WHERE key = 'c'").Scan(&v); err != nil {
				return -1
			}
			return counter(fence.Record{Value: v})
		}
		if err := s.Put(t.Context(), "c", 3, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetForUpdate(t.Context(), "c", 3); err != nil {
			t.Fatal(err) // claimed: Update's claim is then a read
		}
		calls := 0
		var lost <-chan struct{}
		err = s.Update(t.Context(), "c", 3, func(r fence.Record) ([]byte, error) {
			calls++
			if calls == 1 {
				lost = p.LoseReplies(t, "the write to be applied", func() bool { return stored() == 2 })
			}
			return binary.BigEndian.AppendUint64(nil, uint64(counter(r)+1)), nil
		})
		<-lost
		if got := stored(); got != 2 || calls != 1 {
			t.Fatalf("counter %d after fn ran %d times, want 2 after once (error %v)", got, calls, err)
		}
		fencewant.Unknown(t, err, 3)
	})
}
