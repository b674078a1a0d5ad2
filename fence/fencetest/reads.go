package fencetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// updater is the store under test as an [fence.Updater].
func updater(t *testing.T, s fence.Store) fence.Updater {
	t.Helper()
	u, ok := s.(fence.Updater)
	if !ok {
		t.Fatalf("%T does not implement fence.Updater (GetForUpdate and Update)", s)
	}
	return u
}

// testReadClaims is the lost update a fenced read prevents. Holder 5 has
// written once and is paused before its second write; holder 9 reads, then
// 5's late write arrives, then 9 writes what it computed from its read.
// Read with GetForUpdate, 5's late write must be refused, or 9's write
// must fail: never may both succeed silently. The control, on another
// key of the same store, reads with a plain Get and must show the loss
// (both writes accepted): otherwise the case proves nothing.
func testReadClaims(t *testing.T, s fence.Store) {
	u := updater(t, s)
	lost := func(read func(k string) (fence.Record, error)) (lateErr, newErr error) {
		k := key(t)
		mustPut(t, s, k, 5, 1)
		if _, err := read(k); err != nil {
			t.Fatalf("read before the late write: %v", err)
		}
		lateErr = put(t, s, k, 5, 2)
		newErr = put(t, s, k, 9, 3)
		return lateErr, newErr
	}
	late, newer := lost(func(k string) (fence.Record, error) { return s.Get(t.Context(), k) })
	if late != nil || newer != nil {
		t.Fatalf("control (plain Get, then the late write, then the newer write): got %v and %v, want both accepted, the late write lost: the case proves nothing on this store", late, newer)
	}
	late, newer = lost(func(k string) (fence.Record, error) { return u.GetForUpdate(t.Context(), k, 9) })
	if late == nil && newer == nil {
		t.Fatal("GetForUpdate(token 9), then token 5's late write, then token 9's write: both accepted; the late write was lost silently")
	}
	if late != nil {
		wantStale(t, late, 5, 9)
	}
}

// testReadRecord checks what GetForUpdate returns and leaves: the record as
// it was, with the claim's token, and the floor raised.
func testReadRecord(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	mustPut(t, s, k, 4, 1)
	r, err := u.GetForUpdate(t.Context(), k, 7)
	if err != nil {
		t.Fatalf("GetForUpdate(token 7) over token 4: got %v, want nil", err)
	}
	if string(r.Value) != string(value(4, 1)) || r.Token != 7 {
		t.Fatalf("GetForUpdate: got token %d value %q, want token 7 value %q", r.Token, r.Value, value(4, 1))
	}
	if g := mustGet(t, s, k); string(g.Value) != string(value(4, 1)) || (g.Token != 4 && g.Token != 7) {
		t.Fatalf("Get after the claim: got token %d value %q, want value %q with the writer's token 4 or the claim's 7", g.Token, g.Value, value(4, 1))
	}
	if _, err := u.GetForUpdate(t.Context(), k, 7); err != nil {
		t.Fatalf("GetForUpdate again with the same token: got %v, want nil", err)
	}
	wantStale(t, put(t, s, k, 6, 2), 6, 7)
	_, err = u.GetForUpdate(t.Context(), k, 5)
	wantStale(t, err, 5, 7)
	mustPut(t, s, k, 7, 3)
	wantRecord(t, s, k, 7, 3)
}

// testReadMissing claims a key that holds no value: GetForUpdate says not
// found, a plain Get still does, and a lower token's first write is refused.
func testReadMissing(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	if _, err := u.GetForUpdate(t.Context(), k, 9); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key never written: got %v, want an error matching fence.ErrNotFound", err)
	}
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get of a key only claimed: got %v, want an error matching fence.ErrNotFound", err)
	}
	wantStale(t, put(t, s, k, 5, 1), 5, 9)
	mustPut(t, s, k, 9, 2)
	wantRecord(t, s, k, 9, 2)
}

// testUpdateCounter counts with Update: from no value, ten increments.
func testUpdateCounter(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	for i := range 10 {
		err := u.Update(t.Context(), k, 3, func(old fence.Record) ([]byte, error) {
			if i == 0 && (old.Token != 0 || old.Value != nil) {
				return nil, fmt.Errorf("the first Update's record: got token %d value %q, want the zero Record", old.Token, old.Value)
			}
			return increment(old)
		})
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	if r := mustGet(t, s, k); string(r.Value) != "10" || r.Token != 3 {
		t.Fatalf("after ten increments: got token %d value %q, want token 3 value \"10\"", r.Token, r.Value)
	}
}

// testUpdateConcurrent has writers with one token increment one counter at
// once: no increment that Update acknowledged may be lost, and an Update
// may fail only with ErrConflict.
func testUpdateConcurrent(t *testing.T, s fence.Store) {
	u := updater(t, s)
	const writers, rounds = 4, 6
	k := key(t)
	var mu sync.Mutex
	acked := 0
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range rounds {
				err := u.Update(t.Context(), k, 3, increment)
				mu.Lock()
				switch {
				case err == nil:
					acked++
				case !errors.Is(err, fence.ErrConflict):
					t.Errorf("concurrent Update: got %v, want nil or an error matching fence.ErrConflict", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if r := mustGet(t, s, k); string(r.Value) != strconv.Itoa(acked) {
		t.Fatalf("after %d acknowledged increments: the counter is %q: an acknowledged update was lost", acked, r.Value)
	}
}

// testUpdateLateWrite has an older holder's write arrive between Update's
// read and its write: it must be refused, and Update's value stored.
func testUpdateLateWrite(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	mustPut(t, s, k, 5, 1)
	var late error
	err := u.Update(t.Context(), k, 9, func(old fence.Record) ([]byte, error) {
		late = put(t, s, k, 5, 2)
		return value(9, 3), nil
	})
	if err != nil {
		t.Fatalf("Update(token 9) with a late token-5 write in between: got %v, want nil", err)
	}
	wantStale(t, late, 5, 9)
	wantRecord(t, s, k, 9, 3)
}

// testUpdateRefused: a newer holder refuses Update before fn runs; fn's
// error and panic write nothing.
func testUpdateRefused(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	mustPut(t, s, k, 10, 1)
	called := false
	err := u.Update(t.Context(), k, 7, func(fence.Record) ([]byte, error) { called = true; return []byte("x"), nil })
	wantStale(t, err, 7, 10)
	if called {
		t.Error("Update under a newer holder's floor called fn; want it refused before")
	}
	boom := errors.New("fencetest: fn's own error")
	if err := u.Update(t.Context(), k, 10, func(fence.Record) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Update whose fn fails: got %v, want fn's error", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "fencetest: fn panics" {
				t.Errorf("Update whose fn panics: recovered %v, want the panic passed on", p)
			}
		}()
		_ = u.Update(t.Context(), k, 10, func(fence.Record) ([]byte, error) { panic("fencetest: fn panics") })
	}()
	wantRecord(t, s, k, 10, 1)
}

// testReadInvalidInput: bad arguments are refused before any I/O.
func testReadInvalidInput(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	inc := fence.UpdateFunc(increment)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		key   string
		token fence.Token
		fn    fence.UpdateFunc
		want  error
	}{
		{"empty key", t.Context(), "", 1, inc, fence.ErrInvalidKey},
		{"zero token", t.Context(), k, 0, inc, fence.ErrInvalidToken},
		{"negative token", t.Context(), k, -3, inc, fence.ErrInvalidToken},
		{"nil function", t.Context(), k, 1, nil, fence.ErrInvalidArgument},
		{"cancelled context", cancelled, k, 1, inc, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := u.Update(tt.ctx, tt.key, tt.token, tt.fn); !errors.Is(err, tt.want) {
				t.Errorf("Update: got %v, want an error matching %v", err, tt.want)
			}
			if tt.fn == nil {
				return
			}
			if _, err := u.GetForUpdate(tt.ctx, tt.key, tt.token); !errors.Is(err, tt.want) {
				t.Errorf("GetForUpdate: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	mustPut(t, s, k, 1, 1) // nothing claimed k above 1
}

// increment is an UpdateFunc that counts: no value is 0.
func increment(old fence.Record) ([]byte, error) {
	n := 0
	if old.Value != nil {
		var err error
		if n, err = strconv.Atoi(string(old.Value)); err != nil {
			return nil, fmt.Errorf("fencetest: counter value %q: %w", old.Value, err)
		}
	}
	return strconv.AppendInt(nil, int64(n+1), 10), nil
}

// testUpdateCtxEnds ends Update's context while fn runs: Update fails and
// the record keeps its value.
func testUpdateCtxEnds(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	mustPut(t, s, k, 3, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := u.Update(ctx, k, 3, func(fence.Record) ([]byte, error) {
		cancel()
		return value(3, 2), nil
	})
	if err == nil {
		t.Fatal("Update whose context ended while fn ran: got nil, want an error")
	}
	wantRecord(t, s, k, 3, 1)
}

// testUpdateInPlace has fn compute its value in old.Value's own bytes,
// which [fence.UpdateFunc] allows: the write is still conditional on the
// record as read, so it lands, once. A store whose condition shares those
// bytes (a compare by value) looks for fn's value instead, and is
// refused round after round.
func testUpdateInPlace(t *testing.T, s fence.Store) {
	u := updater(t, s)
	k := key(t)
	if err := s.Put(t.Context(), k, 3, []byte("1")); err != nil {
		t.Fatalf("Put: got %v, want nil", err)
	}
	calls := 0
	err := u.Update(t.Context(), k, 3, func(old fence.Record) ([]byte, error) {
		calls++
		if len(old.Value) != 1 {
			return nil, errorf("Update's record: got value %q, want \"1\"", old.Value)
		}
		old.Value[0]++
		return old.Value, nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("Update whose fn changes old.Value in place: got %v after %d calls of fn, want nil after 1", err, calls)
	}
	if r := mustGet(t, s, k); string(r.Value) != "2" || r.Token != 3 {
		t.Fatalf("after the Update: got token %d value %q, want token 3 value \"2\"", r.Token, r.Value)
	}
}
