package postgres_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// TestStoreUpdateInPlace: an fn that computes its value in old.Value's own
// bytes (nothing in fence.UpdateFunc forbids it) still has its swap
// compared with the record as read: the write lands, once. Without the
// copy, the swap's condition is fn's value, which the row does not hold,
// and Update ends in ErrConflict having written nothing.
func TestStoreUpdateInPlace(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "k", 3, []byte("1")); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := s.Update(ctx, "k", 3, func(old fence.Record) ([]byte, error) {
		calls++
		old.Value[0]++
		return old.Value, nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("Update: got %v after %d calls of fn, want nil after 1", err, calls)
	}
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "2" {
		t.Fatalf("Get: got %q, %v, want \"2\"", r.Value, err)
	}
}
