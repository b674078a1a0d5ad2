package sqlcbank_test

import (
	"errors"
	"testing"

	sqlcbank "github.com/fencelock/fencelock/docs/sqlc"
	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestSetBalance: a holder's write lands and takes the row's fence to its
// token; an older holder's write arriving after a newer one is refused
// with a *fence.StaleError and changes nothing.
func TestSetBalance(t *testing.T) {
	pool := newBank(t)
	q := db.New(pool)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")

	if err := sqlcbank.SetBalance(ctx, q, 5, "acct-A", 900); err != nil {
		t.Fatalf("holder 5: got %v, want nil", err)
	}
	wantAccount(t, pool, "acct-A", 900, 5)
	if err := sqlcbank.SetBalance(ctx, q, 5, "acct-A", 800); err != nil {
		t.Fatalf("holder 5 again: got %v, want nil (its own token)", err)
	}
	if err := sqlcbank.SetBalance(ctx, q, 9, "acct-A", 700); err != nil {
		t.Fatalf("holder 9: got %v, want nil", err)
	}
	err := sqlcbank.SetBalance(ctx, q, 5, "acct-A", 1) // holder 5's late write
	fencewant.Stale(t, err, 5, 9)
	wantAccount(t, pool, "acct-A", 700, 9)
}

// TestSetBalanceUnfencedControl runs TestSetBalance's scenario through the
// unfenced SetBalance query: the older holder's late write lands over the
// newer holder's. Without the predicate the scenario loses a write, so
// the fenced test above proves the predicate.
func TestSetBalanceUnfencedControl(t *testing.T) {
	pool := newBank(t)
	q := db.New(pool)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
	if err := sqlcbank.SetBalance(ctx, q, 9, "acct-A", 700); err != nil {
		t.Fatalf("holder 9: got %v, want nil", err)
	}
	if err := q.SetBalance(ctx, db.SetBalanceParams{ID: "acct-A", Balance: 1}); err != nil {
		t.Fatalf("holder 5's late write, unfenced: got %v, want nil", err)
	}
	wantAccount(t, pool, "acct-A", 1, 9) // the newer holder's 700 is lost
}

// TestMissingAccount: a fenced write or claim of an account that does not
// exist is ErrNotFound, never fence.ErrStale; Put creates it.
func TestMissingAccount(t *testing.T) {
	pool := newBank(t)
	q := db.New(pool)
	ctx := t.Context()
	err := sqlcbank.SetBalance(ctx, q, 5, "nobody", 1)
	if !errors.Is(err, sqlcbank.ErrNotFound) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("SetBalance: got %v, want ErrNotFound and not fence.ErrStale", err)
	}
	_, err = sqlcbank.Claim(ctx, q, 5, "nobody")
	if !errors.Is(err, sqlcbank.ErrNotFound) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Claim: got %v, want ErrNotFound and not fence.ErrStale", err)
	}
	if err := sqlcbank.Put(ctx, q, 5, "nobody", 1); err != nil {
		t.Fatalf("Put: got %v, want nil", err)
	}
	wantAccount(t, pool, "nobody", 1, 5)
}

// TestPut: the fenced upsert creates an account, updates it with the same
// or a newer token, and refuses an older one, changing nothing.
func TestPut(t *testing.T) {
	pool := newBank(t)
	q := db.New(pool)
	ctx := t.Context()
	for _, w := range []struct {
		token   fence.Token
		balance int64
	}{{5, 100}, {5, 200}, {9, 300}} {
		if err := sqlcbank.Put(ctx, q, w.token, "acct-A", w.balance); err != nil {
			t.Fatalf("Put token %d: got %v, want nil", w.token, err)
		}
	}
	fencewant.Stale(t, sqlcbank.Put(ctx, q, 5, "acct-A", 1), 5, 9)
	wantAccount(t, pool, "acct-A", 300, 9)
}

// TestClaim: a claim raises the fence and returns the row; after it, a
// write with an older token is refused; an older claim is refused too.
func TestClaim(t *testing.T) {
	pool := newBank(t)
	q := db.New(pool)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('acct-A', 1000, 3)")
	acct, err := sqlcbank.Claim(ctx, q, 9, "acct-A")
	if err != nil {
		t.Fatalf("Claim: got %v, want nil", err)
	}
	if acct != (db.Account{ID: "acct-A", Balance: 1000, Fence: 9}) {
		t.Fatalf("Claim: got %+v, want acct-A with balance 1000 and fence 9", acct)
	}
	fencewant.Stale(t, sqlcbank.SetBalance(ctx, q, 5, "acct-A", 1), 5, 9)
	_, err = sqlcbank.Claim(ctx, q, 5, "acct-A")
	fencewant.Stale(t, err, 5, 9)
	wantAccount(t, pool, "acct-A", 1000, 9)
}

// TestInvalidBeforeIO: a token <= 0 or a nil handle is refused with
// fence.ErrInvalidArgument before any statement is sent.
func TestInvalidBeforeIO(t *testing.T) {
	ctx := t.Context()
	q := db.New(noIO{t})
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"SetBalance token 0", func() error { return sqlcbank.SetBalance(ctx, q, 0, "acct-A", 1) }},
		{"Put token -1", func() error { return sqlcbank.Put(ctx, q, -1, "acct-A", 1) }},
		{"Claim token 0", func() error { _, err := sqlcbank.Claim(ctx, q, 0, "acct-A"); return err }},
		{"Withdraw token 0", func() error { return sqlcbank.Withdraw(ctx, noIO{t}, 0, "acct-A", 1) }},
		{"SetBalance nil queries", func() error { return sqlcbank.SetBalance(ctx, nil, 5, "acct-A", 1) }},
		{"Withdraw nil handle", func() error { return sqlcbank.Withdraw(ctx, nil, 5, "acct-A", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want fence.ErrInvalidArgument", err)
			}
		})
	}
}

// TestWithdraw: the claim-compute-write transaction lands; an older
// holder's is refused at its claim; too little money is the function's
// own refusal; neither writes anything.
func TestWithdraw(t *testing.T) {
	pool := newBank(t)
	ctx := t.Context()
	mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
	if err := sqlcbank.Withdraw(ctx, pool, 9, "acct-A", 100); err != nil {
		t.Fatalf("holder 9: got %v, want nil", err)
	}
	wantAccount(t, pool, "acct-A", 900, 9)
	fencewant.Stale(t, sqlcbank.Withdraw(ctx, pool, 5, "acct-A", 100), 5, 9)
	if err := sqlcbank.Withdraw(ctx, pool, 9, "acct-A", 1000); !errors.Is(err, sqlcbank.ErrInsufficientFunds) {
		t.Fatalf("too much: got %v, want ErrInsufficientFunds", err)
	}
	wantAccount(t, pool, "acct-A", 900, 9)
	if err := sqlcbank.Withdraw(ctx, pool, 9, "nobody", 1); !errors.Is(err, sqlcbank.ErrNotFound) {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
}
