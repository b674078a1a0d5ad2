package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// BenchmarkStoreUpdate: Store.Update (a claim, then a conditional write)
// against what it replaces, Store.Get then Store.Put.
func BenchmarkStoreUpdate(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		s, err := sqlfence.NewStore(db, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Put(ctx, "k", 1, []byte("0")); err != nil {
			b.Fatal(err)
		}
		next := func(r fence.Record) ([]byte, error) { return append(r.Value[:0:0], 'x'), nil }
		interleave(b, []string{"getput", "update"}, []func(int) error{
			func(int) error {
				r, err := s.Get(ctx, "k")
				if err != nil {
					return err
				}
				v, _ := next(r)
				return s.Put(ctx, "k", 1, v)
			},
			func(int) error { return s.Update(ctx, "k", 1, next) },
		})
	})
}
