package fencetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// testUpdateAllTransfer is the transfer a multi-key call makes whole.
// Accounts a, b and c hold 1000 each. The older holder (token 5) moves 100
// from a to b and stops between its read and its write; meanwhile a newer
// holder (token 9) moves 10 from b to c. Written with UpdateAll, the older
// transfer must be refused as a whole with a *fence.StaleError naming b,
// and nothing of it land: 1000, 990, 1010. The control, on other keys of
// the same store, writes the older transfer as two Updates, stopped
// between the legs: its debit of a lands, its credit of b is refused, and
// 100 is lost (900, 990, 1010). The stop is the update function's own
// hook, not a timer.
func testUpdateAllTransfer(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	u := updater(t, s)
	newer := func(ks []string) {
		t.Helper()
		if err := u.Update(t.Context(), ks[1], 9, adjust(-10)); err != nil {
			t.Fatalf("the newer holder's debit of %q: %v", ks[1], err)
		}
		if err := u.Update(t.Context(), ks[2], 9, adjust(10)); err != nil {
			t.Fatalf("the newer holder's credit of %q: %v", ks[2], err)
		}
	}

	ctl := keysOneSlot(t, 3)
	open(t, s, ctl)
	if err := u.Update(t.Context(), ctl[0], 5, adjust(-100)); err != nil {
		t.Fatalf("control: the older holder's debit: %v", err)
	}
	newer(ctl) // the older holder is stopped between its legs
	credit := u.Update(t.Context(), ctl[1], 5, adjust(100))
	if sum := total(t, s, ctl); credit == nil || sum == 3000 {
		t.Fatalf("control (two Updates, stopped between the legs): credit %v, total %d: want the credit refused and 100 lost: the case proves nothing on this store", credit, sum)
	}

	ks := keysOneSlot(t, 3)
	open(t, s, ks)
	calls := 0
	err := all.UpdateAll(t.Context(), []fence.Claim{{Resource: ks[0], Token: 5}, {Resource: ks[1], Token: 5}},
		func(old map[string]fence.Record) (map[string][]byte, error) {
			if calls++; calls == 1 {
				newer(ks) // the older holder is stopped between its read and its write
			}
			return move(ks[0], ks[1], 100)(old)
		})
	wantStale(t, err, 5, 9)
	if se := (*fence.StaleError)(nil); errors.As(err, &se) && se.Resource != ks[1] {
		t.Errorf("StaleError.Resource: got %q, want %q, the key the newer holder took", se.Resource, ks[1])
	}
	want := []int{1000, 990, 1010}
	for i, k := range ks {
		if n, _ := balance(t, s, k); n != want[i] {
			t.Errorf("after the refused transfer, %q holds %d, want %d: the older holder's transfer was half applied", k, n, want[i])
		}
	}
	if sum := total(t, s, ks); sum != 3000 {
		t.Errorf("total after the refused UpdateAll: got %d, want 3000", sum)
	}
}

// testUpdateAllRecords checks what UpdateAll reads and writes: each key's
// record (the zero Record for no value), each key's own token, and a key
// the function leaves out keeps its record.
func testUpdateAllRecords(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	ks := keysOneSlot(t, 3)
	mustPut(t, s, ks[2], 2, 1)
	claims := []fence.Claim{{Resource: ks[2], Token: 4}, {Resource: ks[0], Token: 3}, {Resource: ks[1], Token: 4}}
	err := all.UpdateAll(t.Context(), claims, func(old map[string]fence.Record) (map[string][]byte, error) {
		if len(old) != 3 || old[ks[0]].Value != nil || old[ks[1]].Value != nil {
			return nil, errorf("records passed: got %v, want three, the first two with no value", old)
		}
		if r := old[ks[2]]; string(r.Value) != string(value(2, 1)) {
			return nil, errorf("record of %q: got %q, want %q", ks[2], r.Value, value(2, 1))
		}
		return map[string][]byte{ks[0]: value(3, 1), ks[1]: value(4, 1)}, nil
	})
	if err != nil {
		t.Fatalf("UpdateAll: got %v, want nil", err)
	}
	wantRecord(t, s, ks[0], 3, 1)
	wantRecord(t, s, ks[1], 4, 1)
	if r := mustGet(t, s, ks[2]); string(r.Value) != string(value(2, 1)) {
		t.Fatalf("the key left out: got %q, want its record %q kept", r.Value, value(2, 1))
	}
	wantStale(t, put(t, s, ks[2], 3, 2), 3, 4) // claimed all the same
}

// testUpdateAllSameTokenBetween is the other half of UpdateAll's write
// condition: no key's record changed since the read. Accounts a and b hold
// 1000 each; the holder (token 3) moves 100 from a to b, and between its
// read and its write the same holder credits a with 1 by an Update. The
// write must be refused by a's changed record, whatever the floors say,
// and UpdateAll read again and call fn a second time: a ends at 901. A
// store that checks only the floors writes the transfer computed from the
// first read over the credit, and a holds 900.
func testUpdateAllSameTokenBetween(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	u := updater(t, s)
	ks := keysOneSlot(t, 2)
	for _, k := range ks {
		if err := u.Update(t.Context(), k, 3, adjust(1000)); err != nil {
			t.Fatalf("Update(%q, token 3): %v", k, err)
		}
	}
	calls := 0
	err := all.UpdateAll(t.Context(), []fence.Claim{{Resource: ks[0], Token: 3}, {Resource: ks[1], Token: 3}},
		func(old map[string]fence.Record) (map[string][]byte, error) {
			if calls++; calls == 1 { // the same holder credits a meanwhile
				if err := u.Update(t.Context(), ks[0], 3, adjust(1)); err != nil {
					return nil, errorf("the credit of %q between the read and the write: %w", ks[0], err)
				}
			}
			return move(ks[0], ks[1], 100)(old)
		})
	if err != nil {
		t.Fatalf("UpdateAll: got %v, want nil", err)
	}
	if n, _ := balance(t, s, ks[0]); n != 901 || calls != 2 {
		t.Errorf("after a transfer of 100 from %q with a credit of 1 between its read and its write: got %d (fn called %d times), want 901 (2 times): the credit was lost", ks[0], n, calls)
	}
	if n, _ := balance(t, s, ks[1]); n != 1100 {
		t.Errorf("%q after the transfer: got %d, want 1100", ks[1], n)
	}
}

// testUpdateAllConcurrent has writers with the same tokens move money
// between two accounts at once: the total is kept, and an UpdateAll may
// fail only with ErrConflict.
func testUpdateAllConcurrent(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	ks := keysOneSlot(t, 2)
	open(t, s, ks)
	claims := []fence.Claim{{Resource: ks[0], Token: 3}, {Resource: ks[1], Token: 3}}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 5 {
				err := all.UpdateAll(t.Context(), claims, move(ks[w%2], ks[1-w%2], 7))
				if err != nil && !errors.Is(err, fence.ErrConflict) {
					t.Errorf("concurrent UpdateAll: got %v, want nil or an error matching fence.ErrConflict", err)
				}
			}
		})
	}
	wg.Wait()
	if sum := total(t, s, ks); sum != 2000 {
		t.Fatalf("total after concurrent transfers: got %d, want 2000", sum)
	}
}

// testUpdateAllRefused: a newer holder on one key refuses UpdateAll before
// fn runs, naming that key; fn's error, a panic and a key fn was not given
// write nothing.
func testUpdateAllRefused(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	ks := keysOneSlot(t, 2)
	mustPut(t, s, ks[0], 7, 1)
	mustPut(t, s, ks[1], 10, 1)
	claims := []fence.Claim{{Resource: ks[0], Token: 7}, {Resource: ks[1], Token: 7}}
	called := false
	err := all.UpdateAll(t.Context(), claims, func(map[string]fence.Record) (map[string][]byte, error) {
		called = true
		return nil, nil
	})
	wantStale(t, err, 7, 10)
	if se := (*fence.StaleError)(nil); errors.As(err, &se) && se.Resource != ks[1] {
		t.Errorf("StaleError.Resource: got %q, want %q", se.Resource, ks[1])
	}
	if called {
		t.Error("UpdateAll under a newer holder's floor called fn; want it refused before")
	}
	claims[1].Token = 10
	boom := errors.New("fencetest: fn's own error")
	fails := func(map[string]fence.Record) (map[string][]byte, error) { return nil, boom }
	if err := all.UpdateAll(t.Context(), claims, fails); !errors.Is(err, boom) {
		t.Errorf("UpdateAll whose fn fails: got %v, want fn's error", err)
	}
	stray := func(map[string]fence.Record) (map[string][]byte, error) {
		return map[string][]byte{ks[0]: value(7, 2), key(t): value(7, 2)}, nil
	}
	if err := all.UpdateAll(t.Context(), claims, stray); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("UpdateAll whose fn returns a key not claimed: got %v, want an error matching fence.ErrInvalidArgument", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "fencetest: fn panics" {
				t.Errorf("UpdateAll whose fn panics: recovered %v, want the panic passed on", p)
			}
		}()
		_ = all.UpdateAll(t.Context(), claims, func(map[string]fence.Record) (map[string][]byte, error) { panic("fencetest: fn panics") })
	}()
	wantRecord(t, s, ks[0], 7, 1)
	wantRecord(t, s, ks[1], 10, 1)
}

// testUpdateAllInvalidInput: bad arguments are refused before any I/O,
// and UpdateHeld refuses a nil holder, a typed nil too.
func testUpdateAllInvalidInput(t *testing.T, s fence.Store) {
	all, ok := allUpdater(t, s)
	if !ok {
		return
	}
	ks := keysOneSlot(t, 2)
	fn := move(ks[0], ks[1], 1)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	two := func(a, b fence.Token) []fence.Claim {
		return []fence.Claim{{Resource: ks[0], Token: a}, {Resource: ks[1], Token: b}}
	}
	tests := []struct {
		name   string
		ctx    context.Context
		claims []fence.Claim
		fn     fence.UpdateAllFunc
		want   error
	}{
		{"no claims", t.Context(), nil, fn, fence.ErrInvalidArgument},
		{"one key, two tokens", t.Context(), []fence.Claim{{Resource: ks[0], Token: 1}, {Resource: ks[0], Token: 2}}, fn, fence.ErrInvalidArgument},
		{"empty key", t.Context(), []fence.Claim{{Resource: "", Token: 1}}, fn, fence.ErrInvalidKey},
		{"zero token", t.Context(), two(1, 0), fn, fence.ErrInvalidToken},
		{"negative token", t.Context(), two(-1, 1), fn, fence.ErrInvalidToken},
		{"nil function", t.Context(), two(1, 1), nil, fence.ErrInvalidArgument},
		{"cancelled context", cancelled, two(1, 1), fn, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := all.UpdateAll(tt.ctx, tt.claims, tt.fn); !errors.Is(err, tt.want) {
				t.Errorf("UpdateAll: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	var typedNil *heldClaims
	for _, h := range []fence.Claimer{nil, typedNil} {
		if err := fence.UpdateHeld(t.Context(), all, h, fn); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("UpdateHeld(%#v): got %v, want an error matching fence.ErrInvalidArgument", h, err)
		}
	}
	if err := fence.UpdateHeld(t.Context(), all, &heldClaims{two(1, 1)}, fn); err != nil {
		t.Errorf("UpdateHeld of a holder of both keys with token 1: got %v, want nil", err)
	}
	mustPut(t, s, ks[0], 1, 1) // nothing claimed ks[0] above 1
}

// heldClaims is a [fence.Claimer] of fixed claims.
type heldClaims struct{ claims []fence.Claim }

func (h *heldClaims) Claims() []fence.Claim { return h.claims }
