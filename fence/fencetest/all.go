package fencetest

import (
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// allUpdater is the store under test as an [fence.AllUpdater], and false
// for a store that has no multi-key call (S3, GCS, SQL): those pass the
// UpdateAll cases with nothing to check, and say so in the log.
func allUpdater(t *testing.T, s fence.Store) (fence.AllUpdater, bool) {
	t.Helper()
	a, ok := s.(fence.AllUpdater)
	if !ok {
		t.Logf("%T has no UpdateAll (fence.AllUpdater): nothing to check", s)
	}
	return a, ok
}

// keysOneSlot returns n keys no other subtest uses, in one Redis hash slot
// (they share a hash tag), as fence/redis's UpdateAll needs.
func keysOneSlot(t *testing.T, n int) []string {
	t.Helper()
	tag := key(t)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "{" + tag + "}/" + string(rune('a'+i))
	}
	return ks
}

// balance is an account's balance as the transfer cases store it.
func balance(t *testing.T, s fence.Store, k string) (int, fence.Token) {
	t.Helper()
	r := mustGet(t, s, k)
	n, err := strconv.Atoi(string(r.Value))
	if err != nil {
		t.Fatalf("balance of %q: %q is not a number", k, r.Value)
	}
	return n, r.Token
}

// amount reads a balance from a record passed to an update function.
func amount(r fence.Record) (int, error) {
	if r.Value == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(string(r.Value))
	if err != nil {
		return 0, errorf("balance %q: %w", r.Value, err)
	}
	return n, nil
}

func itoa(n int) []byte { return strconv.AppendInt(nil, int64(n), 10) }

// move is the update function of a transfer of n from one key to another.
func move(from, to string, n int) fence.UpdateAllFunc {
	return func(old map[string]fence.Record) (map[string][]byte, error) {
		a, err := amount(old[from])
		if err != nil {
			return nil, err
		}
		b, err := amount(old[to])
		if err != nil {
			return nil, err
		}
		return map[string][]byte{from: itoa(a - n), to: itoa(b + n)}, nil
	}
}

// adjust is the update function of one leg of a transfer, for Update.
func adjust(n int) fence.UpdateFunc {
	return func(old fence.Record) ([]byte, error) {
		a, err := amount(old)
		return itoa(a + n), err
	}
}

// open puts 1000 in each key with token 1.
func open(t *testing.T, s fence.Store, ks []string) {
	t.Helper()
	for _, k := range ks {
		if err := s.Put(t.Context(), k, 1, itoa(1000)); err != nil {
			t.Fatalf("Put(%q, token 1): %v", k, err)
		}
	}
}

// total is the sum of the balances of ks.
func total(t *testing.T, s fence.Store, ks []string) int {
	t.Helper()
	sum := 0
	for _, k := range ks {
		n, _ := balance(t, s, k)
		sum += n
	}
	return sum
}
