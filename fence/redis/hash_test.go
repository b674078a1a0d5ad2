package redisfence_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

func TestHashSet(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	k := prefix(t) + "acct"
	if err := h.Set(t.Context(), k, 5, map[string]string{"owner": "ada", "balance": "100"}); err != nil {
		t.Fatal(err)
	}
	if got := field(t, c, k, "fence"); got != "0000000000000000005" {
		t.Fatalf("token field: got %q, want the token in 19 digits", got)
	}
	fencewant.Stale(t, h.Set(t.Context(), k, 4, map[string]string{"balance": "0"}), 4, 5)
	if got := field(t, c, k, "balance"); got != "100" {
		t.Fatalf("balance after a stale Set: got %q, want 100 (nothing changed)", got)
	}
	if err := h.Set(t.Context(), k, 5, map[string]string{"balance": "90"}); err != nil {
		t.Fatalf("Set with the same token: %v", err)
	}
	if err := h.Set(t.Context(), k, 8, map[string]string{"balance": "80"}); err != nil {
		t.Fatal(err)
	}
	if got := field(t, c, k, "owner") + "/" + field(t, c, k, "balance"); got != "ada/80" {
		t.Fatalf("fields: got %s, want ada/80 (Set writes only the fields it is given)", got)
	}
}

// The lost update a fenced read prevents, on a user's hash: token 5 wrote
// and is paused before a second write; token 9 reads, 5's late write
// arrives, 9 writes what it computed. With GetForUpdate, 5's late write is
// refused; the control reads with a plain HGET and loses it.
func TestHashReadClaims(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	lost := func(read func(k string) string) (balance string, late, newer error) {
		k := prefix(t) + "acct"
		if err := h.Set(t.Context(), k, 5, map[string]string{"balance": "100"}); err != nil {
			t.Fatal(err)
		}
		read9 := read(k)
		late = h.Set(t.Context(), k, 5, map[string]string{"balance": "200"}) // a deposit of 100, late
		n, _ := strconv.Atoi(read9)
		newer = h.Set(t.Context(), k, 9, map[string]string{"balance": strconv.Itoa(n - 30)})
		return field(t, c, k, "balance"), late, newer
	}
	balance, late, newer := lost(func(k string) string { return field(t, c, k, "balance") })
	if late != nil || newer != nil || balance != "70" {
		t.Fatalf("control (plain HGET): got %v, %v, balance %s; want both accepted and the deposit lost (70)", late, newer, balance)
	}
	balance, late, newer = lost(func(k string) string {
		m, err := h.GetForUpdate(t.Context(), k, 9, "balance")
		if err != nil {
			t.Fatal(err)
		}
		return m["balance"]
	})
	fencewant.Stale(t, late, 5, 9)
	if newer != nil || balance != "70" {
		t.Fatalf("claimed: got %v, balance %s; want the newer write on the balance it read", newer, balance)
	}
}

func TestHashGetForUpdate(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	k := prefix(t) + "new"
	m, err := h.GetForUpdate(t.Context(), k, 7, "a", "b")
	if err != nil || len(m) != 0 {
		t.Fatalf("GetForUpdate of a hash that does not exist: got %v, %v; want an empty map", m, err)
	}
	fencewant.Stale(t, h.Set(t.Context(), k, 6, map[string]string{"a": "x"}), 6, 7)
	if err := h.Set(t.Context(), k, 7, map[string]string{"a": "x"}); err != nil {
		t.Fatal(err)
	}
	m, err = h.GetForUpdate(t.Context(), k, 7, "a", "b")
	if err != nil || len(m) != 1 || m["a"] != "x" {
		t.Fatalf("GetForUpdate: got %v, %v; want a=x only", m, err)
	}
	_, err = h.GetForUpdate(t.Context(), k, 3)
	fencewant.Stale(t, err, 3, 7)
}

// Writers with one token (a holder's goroutines) each add 1 to a counter
// in a user's hash: none is lost.
func TestHashUpdateConcurrent(t *testing.T) {
	h := mustHash(t, client(t))
	k := prefix(t) + "counter"
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		hw := mustHash(t, client(t))
		wg.Go(func() {
			for range each {
				errs <- hw.Update(t.Context(), k, 3, []string{"n"}, func(old map[string]string) (map[string]string, error) {
					n, _ := strconv.Atoi(old["n"])
					return map[string]string{"n": strconv.Itoa(n + 1)}, nil
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	conflicts := 0
	for err := range errs {
		if errors.Is(err, fence.ErrConflict) {
			conflicts++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	m, err := h.GetForUpdate(t.Context(), k, 3, "n")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(writers*each - conflicts); m["n"] != want {
		t.Fatalf("counter: got %s, want %s (%d updates, %d gave up with ErrConflict)", m["n"], want, writers*each, conflicts)
	}
}

// An Update notices a writer that does not go through a Hash: its write
// compares the fields it read, and it reads again.
func TestHashUpdateNoticesPlainWriter(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	k := prefix(t) + "acct"
	if err := h.Set(t.Context(), k, 5, map[string]string{"balance": "100"}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := h.Update(t.Context(), k, 5, []string{"balance", "note"}, func(old map[string]string) (map[string]string, error) {
		calls++
		if calls == 1 {
			if err := c.HSet(t.Context(), k, "balance", "150").Err(); err != nil {
				return nil, err
			}
		}
		n, _ := strconv.Atoi(old["balance"])
		return map[string]string{"balance": strconv.Itoa(n - 30), "note": fmt.Sprint("call ", calls)}, nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Update: got %v after %d calls, want nil after 2", err, calls)
	}
	if b := field(t, c, k, "balance"); b != "120" {
		t.Fatalf("balance: got %s, want 120 (150 - 30: the plain write kept)", b)
	}
	err = h.Update(t.Context(), k, 4, []string{"balance"}, func(map[string]string) (map[string]string, error) {
		t.Fatal("fn called for a stale token")
		return nil, nil
	})
	fencewant.Stale(t, err, 4, 5)
	wantErr := errors.New("no funds")
	if err := h.Update(t.Context(), k, 5, nil, func(map[string]string) (map[string]string, error) { return nil, wantErr }); err != wantErr {
		t.Fatalf("fn's error: got %v, want it as it is", err)
	}
}

func TestHashCorrupt(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	k := prefix(t) + "k"
	if err := c.HSet(t.Context(), k, "fence", "12").Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.Set(t.Context(), k, 5, map[string]string{"a": "b"}); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Set over a token field of 12: got %v, want ErrCorrupt", err)
	}
	s := prefix(t) + "s"
	if err := c.Set(t.Context(), s, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetForUpdate(t.Context(), s, 5, "a"); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("GetForUpdate of a string key: got %v, want ErrCorrupt", err)
	}
	if v := field(t, c, k, "a"); v != "" {
		t.Fatalf("field a: got %q, want nothing written", v)
	}
}
