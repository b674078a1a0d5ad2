package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestTableGetForUpdate: the fenced read returns the columns as they were
// and raises the row's fence, so that an older token's write is refused
// afterwards; a newer fence refuses it, changing nothing.
func TestTableGetForUpdate(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, note, fence) VALUES ('a', 120, 'n', 4)")
	var balance, fenceTok int64
	var note string
	if err := tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance", "note", "fence"}, &balance, &note, &fenceTok); err != nil {
		t.Fatalf("GetForUpdate(token 7): got %v, want nil", err)
	}
	if balance != 120 || note != "n" || fenceTok != 7 {
		t.Fatalf("GetForUpdate: got balance %d note %q fence %d, want 120 \"n\" 7", balance, note, fenceTok)
	}
	wantAccount(t, pool, "a", 120, 7)
	fencewant.Stale(t, tbl.Update(ctx, pool, "a", 6, postgres.Set("balance", 60)), 6, 7)
	fencewant.Stale(t, tbl.GetForUpdate(ctx, pool, "a", 5, []string{"balance"}, &balance), 5, 7)
	if err := tbl.GetForUpdate(ctx, pool, "a", 7, nil); err != nil {
		t.Fatalf("GetForUpdate(token 7) again, no columns: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 120, 7)
}

// TestTableGetForUpdateControl: the plain SELECT a caller would write
// instead claims nothing: the older token's write lands after it.
func TestTableGetForUpdateControl(t *testing.T) {
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 4)")
	var balance int64
	if err := pool.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 'a'").Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Update(t.Context(), pool, "a", 6, postgres.Set("balance", 60)); err != nil {
		t.Fatalf("control: Update(token 6) after a plain read by token 7: got %v, want nil (it lands)", err)
	}
}

func TestTableGetForUpdateErrors(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 4)")
	var b int64
	err := tbl.GetForUpdate(ctx, pool, "missing", 7, []string{"balance"}, &b)
	if !errors.Is(err, postgres.ErrRowNotFound) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("GetForUpdate of a missing row: got %v, want postgres.ErrRowNotFound only", err)
	}
	err = tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balanse"}, &b)
	if !errors.Is(err, postgres.ErrSchema) || !strings.Contains(err.Error(), "balanse") {
		t.Fatalf("GetForUpdate of an unknown column: got %v, want postgres.ErrSchema naming the column", err)
	}
	wantAccount(t, pool, "a", 120, 4) // the failed statement claimed nothing
	var ok bool
	err = tbl.GetForUpdate(ctx, pool, "a", 7, []string{"balance"}, &ok)
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("GetForUpdate scanning a bigint into a *bool: got %v, want a definite error", err)
	}
}

// TestTableGetForUpdateInvalid: bad input is refused before any I/O.
func TestTableGetForUpdateInvalid(t *testing.T) {
	tbl, _ := tableAndFences(t)
	var b int64
	tests := []struct {
		name  string
		key   any
		token fence.Token
		cols  []string
		dest  []any
		want  error
	}{
		{"empty key", "", 1, []string{"b"}, []any{&b}, fence.ErrInvalidKey},
		{"nil key", nil, 1, []string{"b"}, []any{&b}, fence.ErrInvalidKey},
		{"zero token", "k", 0, []string{"b"}, []any{&b}, fence.ErrInvalidToken},
		{"more destinations", "k", 1, []string{"b"}, []any{&b, &b}, postgres.ErrInvalidArgument},
		{"fewer destinations", "k", 1, []string{"b", "c"}, []any{&b}, postgres.ErrInvalidArgument},
		{"empty column", "k", 1, []string{""}, []any{&b}, postgres.ErrInvalidIdentifier},
		{"NUL in column", "k", 1, []string{"a\x00b"}, []any{&b}, postgres.ErrInvalidIdentifier},
		{"destination not a pointer", "k", 1, []string{"b"}, []any{b}, postgres.ErrInvalidArgument},
		{"nil pointer destination", "k", 1, []string{"b"}, []any{(*int64)(nil)}, postgres.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tbl.GetForUpdate(t.Context(), noIO{t}, tt.key, tt.token, tt.cols, tt.dest...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("GetForUpdate: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	if err := tbl.GetForUpdate(cancelled(t), noIO{t}, "k", 1, nil); err == nil {
		t.Fatal("GetForUpdate with an ended context: got nil, want its error")
	}
}

// TestTableGetForUpdateLocks: in a transaction the row stays locked: a
// write of the same token from another session waits for the transaction,
// then lands over what it wrote.
func TestTableGetForUpdateLocks(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 100, 4)")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var b int64
	if err := tbl.GetForUpdate(ctx, tx, "a", 7, []string{"balance"}, &b); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tbl.Update(ctx, pool, "a", 7, postgres.Add("balance", 1)) }()
	waitLockWaiters(t, pool, 1)
	if err := tbl.Update(ctx, tx, "a", 7, postgres.Set("balance", b+10)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting Update: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 111, 7)
}

// TestTableGetForUpdateHostile: hostile column names are quoted, never
// run.
func TestTableGetForUpdateHostile(t *testing.T) {
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
	var v any
	err := tbl.GetForUpdate(t.Context(), pool, "a", 2, []string{`balance"; DROP TABLE accounts; --`}, &v)
	if !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("GetForUpdate of a hostile column name: got %v, want postgres.ErrSchema", err)
	}
	wantAccount(t, pool, "a", 1, 1)
}
