package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// With a pool of one connection every fenced form completes: the
// statements kept prepared are prepared while the write holds no
// connection (preparing the fence's statement inside its transaction
// waited forever for a second one).
// The same with WithoutPrepare, which sends every statement unprepared.
func TestPoolOfOne(t *testing.T) {
	for _, opts := range [][]sqlfence.Option{nil, {sqlfence.WithoutPrepare()}} {
		t.Run(fmt.Sprintf("options %d", len(opts)), func(t *testing.T) { testPoolOfOne(t, opts) })
	}
}

func testPoolOfOne(t *testing.T, opts []sqlfence.Option) {
	eachServer(t, func(t *testing.T, srv server) {
		var topts []sqlfence.TableOption
		for _, o := range opts {
			topts = append(topts, o)
		}
		db, tbl := newAccounts(t, srv, topts...)
		db.SetMaxOpenConns(1)
		fences, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if err := fences.CreateTable(ctx, db); err != nil {
			t.Fatal(err)
		}
		for tok := int64(1); tok <= 3; tok++ {
			if err := tbl.Upsert(ctx, db, "a", fence.Token(tok), sqlfence.Set("balance", tok)); err != nil {
				t.Fatalf("Upsert %d: %v", tok, err)
			}
			if err := tbl.Update(ctx, db, "a", fence.Token(tok), sqlfence.Set("balance", 10*tok)); err != nil {
				t.Fatalf("Update %d: %v", tok, err)
			}
			err := fences.RunInTx(ctx, db, "r", fence.Token(tok), func(tx *sql.Tx) error {
				return tbl.Update(ctx, tx, "a", fence.Token(tok), sqlfence.Set("note", "tx"))
			})
			if err != nil {
				t.Fatalf("RunInTx %d: %v", tok, err)
			}
			if err := fences.Advance(ctx, db, "r2", fence.Token(tok)); err != nil {
				t.Fatalf("Advance %d: %v", tok, err)
			}
		}
		fencewant.Stale(t, fences.RunInTx(ctx, db, "r", 2, func(*sql.Tx) error { return nil }), 2, 3)
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 0)), 2, 3)
		wantAccount(t, srv, db, "a", 30, 3)
	})
}

// A statement kept prepared goes on working, and fencing, after the table
// is altered, and after it is dropped and created again (each server
// prepares it again by itself).
func TestPreparedAfterSchemaChange(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
		if err := tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 2)); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "ALTER TABLE accounts ADD COLUMN extra BIGINT")
		if err := tbl.Update(ctx, db, "a", 3, sqlfence.Set("balance", 3)); err != nil {
			t.Fatalf("Update after ALTER TABLE: %v", err)
		}
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 0)), 2, 3)
		wantAccount(t, srv, db, "a", 3, 3)
		mustExec(t, db, "DROP TABLE accounts")
		mustExec(t, db, accountsDDL(srv.d))
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 5)")
		if err := tbl.Update(ctx, db, "a", 6, sqlfence.Set("balance", 6)); err != nil {
			t.Fatalf("Update after the table was created again: %v", err)
		}
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 4, sqlfence.Set("balance", 0)), 4, 6)
		wantAccount(t, srv, db, "a", 6, 6)
	})
}
