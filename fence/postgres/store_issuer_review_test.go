package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// A Store that requires issuers refuses an unnamed Put, Delete,
// GetForUpdate and Update before any I/O (the handle fails the test if
// used), saying what to add. The control: a named call reaches the
// handle.
func TestStoreRequiredIssuerNoIO(t *testing.T) {
	s, err := postgres.NewStore(noIO{t}, pgx.Identifier{postgres.DefaultStoreTable}, postgres.RequireIssuer())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Put":          func() error { return s.Put(ctx, "k", 5, []byte("v")) },
		"Delete":       func() error { return s.Delete(ctx, "k", 5) },
		"GetForUpdate": func() error { _, err := s.GetForUpdate(ctx, "k", 5); return err },
		"Update":       func() error { return s.Update(ctx, "k", 5, func(fence.Record) ([]byte, error) { return nil, nil }) },
	} {
		err := call()
		if !errors.Is(err, fence.ErrIssuerRequired) || !strings.Contains(err.Error(), "fence.ContextWithIssuer") {
			t.Errorf("unnamed %s: got %v, want ErrIssuerRequired saying what to add", name, err)
		}
	}
	used := false
	ctl, err := postgres.NewStore(usedIO{&used}, pgx.Identifier{postgres.DefaultStoreTable}, postgres.RequireIssuer())
	if err != nil {
		t.Fatal(err)
	}
	_ = ctl.Put(fence.ContextWithIssuer(ctx, "a"), "k", 5, []byte("v"))
	if !used {
		t.Fatal("control: a named Put did not reach the handle")
	}
}

// usedIO records that it was used, and fails every call.
type usedIO struct{ used *bool }

func (u usedIO) Exec(context.Context, string, ...any) (_ pgconn.CommandTag, _ error) {
	*u.used = true
	return pgconn.CommandTag{}, errors.New("no I/O")
}

func (u usedIO) QueryRow(context.Context, string, ...any) pgx.Row {
	*u.used = true
	return errRow{}
}

func (u usedIO) Begin(context.Context) (pgx.Tx, error) {
	*u.used = true
	return nil, errors.New("no I/O")
}

// Through a pgx.Tx handle, an issuer's claims, repeated, and its Update
// land; another issuer's claim in its own transaction is refused.
func TestStoreIssuerInTx(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newIssuerStoreOn(t, pool)
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	if err := s.Put(ctxA, "k", 3, []byte("a3")); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		st, err := postgres.NewStore(tx, pgx.Identifier{postgres.DefaultStoreTable}, postgres.RequireIssuer())
		if err != nil {
			return err
		}
		for i := range 2 {
			if _, err := st.GetForUpdate(ctxA, "k", 5); err != nil {
				return fmt.Errorf("claim %d: %w", i+1, err)
			}
		}
		return st.Update(ctxA, "k", 5, func(r fence.Record) ([]byte, error) { return append(r.Value, '+'), nil })
	})
	if err != nil {
		t.Fatalf("a's claims and Update in a transaction: got %v, want nil", err)
	}
	wantRec(t, s, "k", 5, "a3+")
	err = pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		st, err := postgres.NewStore(tx, pgx.Identifier{postgres.DefaultStoreTable}, postgres.RequireIssuer())
		if err != nil {
			return err
		}
		_, err = st.GetForUpdate(fence.ContextWithIssuer(t.Context(), "b"), "k", 5)
		return err
	})
	if !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("b's claim at a's token in a transaction: got %v, want ErrIssuerMismatch", err)
	}
	wantRec(t, s, "k", 5, "a3+")
}

// A key whose floor names no issuer, claimed by two issuers at once (the
// same token, and the read-only path open to both): one claim records
// its issuer, the other is refused, and the loser's Update never runs
// fn.
func TestStoreIssuerNullKeyClaimRace(t *testing.T) {
	s := newIssuerStore(t, true)
	for i := range 20 {
		k := fmt.Sprintf("null-%d", i)
		if err := s.Put(t.Context(), k, 5, []byte("none")); err != nil { // names none
			t.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs = map[string]error{}
			ran  = map[string]bool{}
		)
		for _, iss := range []string{"a", "b"} {
			wg.Go(func() {
				err := s.Update(fence.ContextWithIssuer(t.Context(), iss), k, 5, func(fence.Record) ([]byte, error) {
					mu.Lock()
					ran[iss] = true
					mu.Unlock()
					return []byte(iss), nil
				})
				mu.Lock()
				errs[iss] = err
				mu.Unlock()
			})
		}
		wg.Wait()
		won := ""
		for iss, err := range errs {
			switch {
			case err == nil && won == "":
				won = iss
			case err == nil:
				t.Fatalf("%s: both issuers' Updates landed", k)
			case !errors.Is(err, fence.ErrIssuerMismatch):
				t.Fatalf("%s: %s's Update: got %v, want nil or ErrIssuerMismatch", k, iss, err)
			case ran[iss]:
				t.Fatalf("%s: %s's refused Update ran fn", k, iss)
			}
		}
		wantRec(t, s, k, 5, won)
	}
}

// wantRec fails t unless key holds value with token.
func wantRec(t *testing.T, s *postgres.Store, key string, token fence.Token, value string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil || r.Token != token || string(r.Value) != value {
		t.Fatalf("%s: got %q at %d (%v), want %q at %d", key, r.Value, r.Token, err, value, token)
	}
}
