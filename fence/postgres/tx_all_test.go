package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// held is a fence.Claimer, as an *etcdlock.MultiLock is.
type held []fence.Claim

func (h held) Claims() []fence.Claim { return h }

func claim(resource string, token fence.Token) fence.Claim {
	return fence.Claim{Resource: resource, Token: token}
}

// wantFence checks the fence table's token for resource (0: no row).
func wantFence(t *testing.T, db postgres.DB, resource string, want fence.Token) {
	t.Helper()
	got, err := defaultFences(t).Current(t.Context(), db, resource)
	if want == 0 && errors.Is(err, fence.ErrNotFound) {
		return
	}
	if err != nil || got != want {
		t.Fatalf("fence of %q: got %d, %v, want %d", resource, got, err, want)
	}
}

// txToken reads the token a fenced transaction recorded for the row
// trigger ("" when none).
func txToken(t *testing.T, tx pgx.Tx) string {
	t.Helper()
	var s *string
	if err := tx.QueryRow(t.Context(), "SELECT current_setting('fencelock.token', true)").Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// TestRunInTxAll raises every claim's fence, each to its own token, before
// fn runs; a duplicate claim is taken once, and the trigger's token is
// recorded only when all claims carry one.
func TestRunInTxAll(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	tests := []struct {
		name   string
		claims []fence.Claim
		want   map[string]fence.Token
		txTok  string
	}{
		{"two tokens", []fence.Claim{claim("b", 5), claim("a", 3)}, map[string]fence.Token{"a": 3, "b": 5}, ""},
		{"one token, a duplicate", []fence.Claim{claim("c", 4), claim("a", 4), claim("c", 4)}, map[string]fence.Token{"a": 4, "c": 4}, "4"},
		{"equal tokens again", []fence.Claim{claim("a", 4), claim("b", 5), claim("c", 4)}, map[string]fence.Token{"a": 4, "b": 5, "c": 4}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := postgres.RunInTxAll(ctx, pool, tt.claims, func(tx pgx.Tx) error {
				calls++
				if got := txToken(t, tx); got != tt.txTok {
					t.Errorf("token recorded for the trigger: got %q, want %q", got, tt.txTok)
				}
				for res, tok := range tt.want {
					wantFence(t, tx, res, tok)
				}
				return nil
			})
			if err != nil || calls != 1 {
				t.Fatalf("RunInTxAll: got %v after %d calls of fn, want nil after 1", err, calls)
			}
			for res, tok := range tt.want {
				wantFence(t, pool, res, tok)
			}
		})
	}
}

// TestRunInTxAllStale: one resource ahead refuses the whole transaction
// before fn, naming that resource; no other claim lands.
func TestRunInTxAllStale(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	f := defaultFences(t)
	for _, c := range []fence.Claim{claim("a", 3), claim("m", 9), claim("z", 12)} {
		if err := f.Advance(ctx, pool, c.Resource, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	called := false
	err := postgres.RunInTxHeld(ctx, pool, held{claim("z", 7), claim("m", 7), claim("a", 5), claim("new", 1)}, func(pgx.Tx) error {
		called = true
		return nil
	})
	fencewant.Stale(t, err, 7, 9) // m, the first one refused in sorted order
	var se *fence.StaleError
	if errors.As(err, &se) && se.Resource != "m" {
		t.Errorf("StaleError.Resource: got %q, want %q", se.Resource, "m")
	}
	if called {
		t.Error("fn called although a resource was ahead")
	}
	wantFence(t, pool, "a", 3)
	wantFence(t, pool, "new", 0)
}

// TestRunInTxAllFnFails: fn's error and panic roll back fn's writes and
// every claim.
func TestRunInTxAllFnFails(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	claims := []fence.Claim{claim("a", 3), claim("b", 4)}
	write := func(tx pgx.Tx) error { return appendLedger(ctx, tx, "a", 3, "A") }
	boom := errors.New("boom")
	err := postgres.RunInTxAll(ctx, pool, claims, func(tx pgx.Tx) error { _ = write(tx); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("RunInTxAll: got %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		_ = postgres.RunInTxAll(ctx, pool, claims, func(tx pgx.Tx) error { _ = write(tx); panic("boom") })
	}()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 0 {
		t.Fatalf("ledger rows: got %d (%v), want 0", n, err)
	}
	wantFence(t, pool, "a", 0)
	wantFence(t, pool, "b", 0)
}

// TestRunInTxAllInTx: in the caller's transaction it is a savepoint, whose
// claims go when that transaction rolls back; options are refused there.
func TestRunInTxAllInTx(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	claims := []fence.Claim{claim("a", 3), claim("b", 4)}
	if err := postgres.RunInTxAll(ctx, tx, claims, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("RunInTxAll in a transaction: got %v, want nil", err)
	}
	wantFence(t, tx, "b", 4)
	err = postgres.RunInTxAll(ctx, tx, claims, func(pgx.Tx) error { return nil }, postgres.WithIsolation(pgx.Serializable))
	if !errors.Is(err, postgres.ErrInvalidOption) {
		t.Fatalf("RunInTxAll on a pgx.Tx with WithIsolation: got %v, want postgres.ErrInvalidOption", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantFence(t, pool, "b", 0)
}

// TestRunInTxAllUnknownOutcome: a COMMIT whose answer is lost gives
// ErrUnknownOutcome, with the first claim's token.
func TestRunInTxAllUnknownOutcome(t *testing.T) {
	pool := newLedger(t)
	err := postgres.RunInTxAll(t.Context(), pool, []fence.Claim{claim("b", 8), claim("a", 6)}, func(tx pgx.Tx) error {
		killBackend(t, pool, tx)
		return nil
	})
	fencewant.Unknown(t, err, 6)
}

// TestRunInTxAllInvalid: bad input is refused before any I/O.
func TestRunInTxAllInvalid(t *testing.T) {
	fn := func(pgx.Tx) error { return nil }
	tests := []struct {
		name   string
		claims []fence.Claim
		fn     func(pgx.Tx) error
		opts   []postgres.TxOption
		want   error
	}{
		{"no claims", nil, fn, nil, fence.ErrInvalidArgument},
		{"empty claims", []fence.Claim{}, fn, nil, fence.ErrInvalidArgument},
		{"empty resource", []fence.Claim{claim("a", 1), claim("", 1)}, fn, nil, fence.ErrInvalidKey},
		{"zero token", []fence.Claim{claim("a", 0)}, fn, nil, fence.ErrInvalidToken},
		{"negative token", []fence.Claim{claim("a", 1), claim("b", -2)}, fn, nil, fence.ErrInvalidToken},
		{"one resource, two tokens", []fence.Claim{claim("a", 3), claim("b", 1), claim("a", 4)}, fn, nil, fence.ErrInvalidArgument},
		{"nil function", []fence.Claim{claim("a", 1)}, nil, nil, postgres.ErrInvalidArgument},
		{"invalid option", []fence.Claim{claim("a", 1)}, fn, []postgres.TxOption{postgres.WithIsolation("bogus")}, postgres.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := postgres.RunInTxAll(t.Context(), noIO{t}, tt.claims, tt.fn, tt.opts...); !errors.Is(err, tt.want) {
				t.Errorf("RunInTxAll: got %v, want an error matching %v", err, tt.want)
			}
			if err := postgres.RunInTxHeld(t.Context(), noIO{t}, held(tt.claims), tt.fn, tt.opts...); !errors.Is(err, tt.want) {
				t.Errorf("RunInTxHeld: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	for name, h := range map[string]fence.Claimer{"nil holder": nil, "typed nil holder": (*held)(nil)} {
		if err := postgres.RunInTxHeld(t.Context(), noIO{t}, h, fn); !errors.Is(err, postgres.ErrInvalidArgument) {
			t.Errorf("RunInTxHeld(%s): got %v, want postgres.ErrInvalidArgument", name, err)
		}
	}
	if err := postgres.RunInTxAll(cancelled(t), noIO{t}, []fence.Claim{claim("a", 1)}, fn); err == nil {
		t.Error("RunInTxAll with an ended context: got nil, want its error")
	}
}
