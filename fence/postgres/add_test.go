package postgres_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestAdd: Add changes a column by a delta in the server, in Update and
// Upsert, next to Set; a stale one changes nothing.
func TestAdd(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 100, 3)")
	if err := tbl.Update(ctx, pool, "a", 4, postgres.Add("balance", int64(-30)), postgres.Set("note", "paid")); err != nil {
		t.Fatalf("Update with Add(-30): got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 70, 4)
	if err := tbl.Upsert(ctx, pool, "a", 4, postgres.Add("balance", 5)); err != nil {
		t.Fatalf("Upsert with Add(5) of an existing row: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 75, 4)
	fencewant.Stale(t, tbl.Update(ctx, pool, "a", 3, postgres.Add("balance", 1000)), 3, 4)
	fencewant.Stale(t, tbl.Upsert(ctx, pool, "a", 3, postgres.Add("balance", 1000)), 3, 4)
	wantAccount(t, pool, "a", 75, 4)
}

// TestAddUpsertNewRow: Upsert creates a missing row with the delta, as if
// the column had held zero, not its default.
func TestAddUpsertNewRow(t *testing.T) {
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "ALTER TABLE accounts ALTER COLUMN balance SET DEFAULT 500")
	if err := tbl.Upsert(t.Context(), pool, "new", 2, postgres.Add("balance", 40)); err != nil {
		t.Fatalf("Upsert with Add(40) of a new row: got %v, want nil", err)
	}
	wantAccount(t, pool, "new", 40, 2)
}

// TestAddConcurrent: concurrent Adds with one token all count, with no
// read in the client. The control computes the same increments in the
// client (read, then Set) and loses all but one.
func TestAddConcurrent(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1), ('b', 0, 1)")
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := tbl.Update(ctx, pool, "a", 1, postgres.Add("balance", 1)); err != nil {
				t.Errorf("Add: %v", err)
			}
		})
	}
	wg.Wait()
	wantAccount(t, pool, "a", n, 1)

	// Control: n read-then-Set increments, all reads before the writes.
	reads := make([]int64, n)
	for i := range reads {
		b, _, _ := account(t, pool, "b")
		reads[i] = b
	}
	for _, b := range reads {
		if err := tbl.Update(ctx, pool, "b", 1, postgres.Set("balance", b+1)); err != nil {
			t.Fatal(err)
		}
	}
	wantAccount(t, pool, "b", 1, 1)
}

// TestAddInvalid: Add's column is checked as Set's is, before any I/O.
func TestAddInvalid(t *testing.T) {
	tbl, _ := tableAndFences(t)
	tests := []struct {
		name string
		set  []postgres.Assignment
		want error
	}{
		{"key column", []postgres.Assignment{postgres.Add("key", 1)}, postgres.ErrInvalidArgument},
		{"fence column", []postgres.Assignment{postgres.Add("fence", 1)}, postgres.ErrInvalidArgument},
		{"Set and Add of one column", []postgres.Assignment{postgres.Set("b", 1), postgres.Add("b", 1)}, postgres.ErrInvalidArgument},
		{"empty column", []postgres.Assignment{postgres.Add("", 1)}, postgres.ErrInvalidIdentifier},
		{"zero Assignment", []postgres.Assignment{{}}, postgres.ErrInvalidIdentifier},
		{"nil amount", []postgres.Assignment{postgres.Add("b", nil)}, postgres.ErrInvalidArgument},
		{"typed nil amount", []postgres.Assignment{postgres.Add("b", (*int64)(nil))}, postgres.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tbl.Update(t.Context(), noIO{t}, "k", 1, tt.set...); !errors.Is(err, tt.want) {
				t.Errorf("Update: got %v, want an error matching %v", err, tt.want)
			}
			if err := tbl.Upsert(t.Context(), noIO{t}, "k", 1, tt.set...); !errors.Is(err, tt.want) {
				t.Errorf("Upsert: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
}
