package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// TestPoolOfOnePostgreSQL: on PostgreSQL a fenced write on a *sql.DB
// takes a connection of its own (sendOnce) and must then take no second
// one: in a pool of one (SetMaxOpenConns(1), or a pool whose other
// connections the caller holds) it would wait for itself until ctx ends.
// Every call below must return well within its 10 s bound.
func TestPoolOfOnePostgreSQL(t *testing.T) {
	srv := servers[len(servers)-1]
	if srv.d != sqlfence.PostgreSQL {
		t.Fatal("servers' last entry is not PostgreSQL")
	}
	db, s := newStore(t, srv)
	mustExec(t, db, accountsDDL(srv.d))
	mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
	tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	inc := func(r fence.Record) ([]byte, error) { return append(r.Value, 'x'), nil }
	var bal int64
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Store.Put", func(ctx context.Context) error { return s.Put(ctx, "k", 2, []byte("v")) }},
		{"Store.GetForUpdate first claim", func(ctx context.Context) error { _, err := s.GetForUpdate(ctx, "k", 3); return err }},
		{"Store.GetForUpdate again", func(ctx context.Context) error { _, err := s.GetForUpdate(ctx, "k", 3); return err }},
		{"Store.GetForUpdate stale", func(ctx context.Context) error {
			if _, err := s.GetForUpdate(ctx, "k", 1); !errors.Is(err, fence.ErrStale) {
				return err
			}
			return nil
		}},
		{"Store.Update", func(ctx context.Context) error { return s.Update(ctx, "k", 4, inc) }},
		{"Store.Update new key", func(ctx context.Context) error { return s.Update(ctx, "new", 4, inc) }},
		{"Store.Delete", func(ctx context.Context) error { return s.Delete(ctx, "new", 5) }},
		{"Table.Update", func(ctx context.Context) error { return tbl.Update(ctx, db, "a", 2, sqlfence.Add("balance", 1)) }},
		{"Table.Update read back (stale)", func(ctx context.Context) error {
			if err := tbl.Update(ctx, db, "a", 1, sqlfence.Add("balance", 1)); !errors.Is(err, fence.ErrStale) {
				return err
			}
			return nil
		}},
		{"Table.Upsert", func(ctx context.Context) error { return tbl.Upsert(ctx, db, "b", 2, sqlfence.Add("balance", 1)) }},
		{"Table.GetForUpdate", func(ctx context.Context) error {
			return tbl.GetForUpdate(ctx, db, "a", 3, []string{"balance"}, &bal)
		}},
		{"Fences.Advance", func(ctx context.Context) error { return f.Advance(ctx, db, "r", 2) }},
		{"Fences.RunInTx", func(ctx context.Context) error {
			return f.RunInTx(ctx, db, "r", 3, func(tx *sql.Tx) error {
				return tbl.Update(ctx, tx, "a", 4, sqlfence.Add("balance", 1))
			})
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := c.call(ctx)
			if err != nil {
				t.Fatalf("got error %v after %v, want nil", err, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}
