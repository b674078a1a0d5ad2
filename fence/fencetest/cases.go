package fencetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
)

func testFirstWrite(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 7, 1)
	wantRecord(t, s, k, 7, 1)
}

func testStale(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 10, 1)
	wantStale(t, put(t, s, k, 9, 2), 9, 10)
	wantStale(t, put(t, s, k, 1, 3), 1, 10)
	wantRecord(t, s, k, 10, 1)
}

func testEqual(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 5, 1)
	mustPut(t, s, k, 5, 2)
	wantRecord(t, s, k, 5, 2)
}

func testHigher(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 5, 1)
	mustPut(t, s, k, 9, 2)
	wantStale(t, put(t, s, k, 7, 3), 7, 9)
	mustPut(t, s, k, 12, 4)
	wantStale(t, put(t, s, k, 9, 5), 9, 12)
	wantRecord(t, s, k, 12, 4)
}

func testGetMissing(t *testing.T, s fence.Store) {
	_, err := s.Get(t.Context(), key(t))
	if !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get of a key never written: got %v, want an error matching fence.ErrNotFound", err)
	}
}

func testInvalidInput(t *testing.T, s fence.Store) {
	k := key(t)
	tests := []struct {
		name  string
		key   string
		token fence.Token
		want  error
	}{
		{"empty key", "", 1, fence.ErrInvalidKey},
		{"zero token", k, 0, fence.ErrInvalidToken},
		{"negative token", k, -3, fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Put(t.Context(), tt.key, tt.token, []byte("x"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	if _, err := s.Get(t.Context(), ""); !errors.Is(err, fence.ErrInvalidKey) {
		t.Errorf("Get(\"\"): got %v, want an error matching fence.ErrInvalidKey", err)
	}
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("after refused puts, Get: got %v, want an error matching fence.ErrNotFound", err)
	}
}

func testCancelled(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 3, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, k, 4, value(4, 2)); err == nil {
		t.Fatal("Put with a cancelled context: got nil error, want one")
	}
	wantRecord(t, s, k, 3, 1)
}

// testCancelMidWrite ends the context at varying points of a write and checks
// that the resource then holds the old record or the new one, whole, and that
// a write reported as done is there. A write whose outcome was unknown may
// still land later (etcd applies a request its client stopped waiting
// for), but the record never goes back to a lower token.
func testCancelMidWrite(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 1, 0)
	last := fence.Token(1)
	maybe := map[fence.Token]bool{} // writes whose outcome was unknown
	for i := range 40 {
		tok := fence.Token(i + 2)
		d := time.Duration(i%10) * 200 * time.Microsecond * time.Duration(1+i/10)
		ctx, cancel := context.WithTimeout(t.Context(), d)
		err := s.Put(ctx, k, tok, value(tok, i))
		cancel()
		r := mustGet(t, s, k)
		got, ok := tokenOf(r.Value)
		if !ok || got != r.Token {
			t.Fatalf("after a cancelled write: record token %d value %q do not belong together", r.Token, r.Value)
		}
		if err != nil {
			maybe[tok] = true
		}
		switch {
		case err == nil && r.Token != tok:
			t.Fatalf("Put(token %d) returned nil but the record has token %d", tok, r.Token)
		case r.Token != tok && r.Token != last && !(maybe[r.Token] && r.Token > last):
			t.Fatalf("after Put(token %d) ended with %v: record has token %d, want %d, %d or a later write of unknown outcome", tok, err, r.Token, last, tok)
		case err != nil && errors.Is(err, fence.ErrStale):
			t.Fatalf("Put(token %d) above every accepted token: got %v, want no ErrStale", tok, err)
		}
		last = r.Token
	}
}

// testConcurrent has writers with different tokens race on one key while an
// observer reads it: the tokens the store shows must never go down, every
// value must belong to its token, a write that starts after a higher token's
// write was acknowledged must be refused, the writer with the highest token
// must never be refused, and the last record must carry the highest token.
func testConcurrent(t *testing.T, s fence.Store) {
	const writers, rounds = 8, 12
	k := key(t)
	stop := make(chan struct{})
	observed := make(chan error, 1)
	go func() { observed <- observe(t.Context(), s, k, stop, ownValue) }()

	var wg sync.WaitGroup
	var acked atomic.Int64 // highest token whose Put has returned nil
	errs := make(chan error, writers*rounds)
	for w := range writers {
		tok := fence.Token(w + 1)
		wg.Go(func() {
			for r := range rounds {
				floor := fence.Token(acked.Load())
				err := s.Put(t.Context(), k, tok, value(tok, r))
				switch {
				case err == nil && tok < floor:
					errs <- errorf("Put(token %d) started after token %d was acknowledged, and was accepted", tok, floor)
				case err == nil:
					raise(&acked, int64(tok))
				case !errors.Is(err, fence.ErrStale) || tok == writers:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Put: got %v, want nil or fence.ErrStale (and nil for the highest token)", err)
	}
	if err := <-observed; err != nil {
		t.Fatal(err)
	}
	wantRecord(t, s, k, writers, rounds-1)
}

// observe reads k until stop is closed and reports the first time the stored
// token goes down or a value does not belong to its token (owns says which
// do).
func observe(ctx context.Context, s fence.Store, k string, stop <-chan struct{}, owns func(fence.Record) bool) error {
	var prev fence.Token
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		r, err := s.Get(ctx, k)
		switch {
		case errors.Is(err, fence.ErrNotFound):
			continue
		case err != nil:
			return errorf("observer: Get: %v", err)
		case !owns(r):
			return errorf("observer: token %d holds a value (%d bytes) of another write", r.Token, len(r.Value))
		case r.Token < prev:
			return errorf("observer: a stale write landed: the stored token went down from %d to %d", prev, r.Token)
		}
		prev = r.Token
	}
}

// ownValue reports whether r's value is the one written with r's token.
func ownValue(r fence.Record) bool {
	tok, ok := tokenOf(r.Value)
	return ok && tok == r.Token
}

// raise sets a to v if v is higher.
func raise(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}
