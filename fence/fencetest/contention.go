package fencetest

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// ContentionOption configures [RunContention]. Create one with
// [WithWriters], [WithRounds] or [WithValueSize].
type ContentionOption interface{ apply(*contention) }

type contention struct{ writers, rounds, size int }

type contentionFunc func(*contention)

func (f contentionFunc) apply(c *contention) { f(c) }

// WithWriters sets how many writers race in each round of [RunContention].
// Default 12; below 2 fails the test.
func WithWriters(n int) ContentionOption {
	return contentionFunc(func(c *contention) { c.writers = n })
}

// WithRounds sets how many rounds [RunContention] runs. Default 8; below 1
// fails the test.
func WithRounds(n int) ContentionOption { return contentionFunc(func(c *contention) { c.rounds = n }) }

// WithValueSize sets the size in bytes of every value [RunContention]
// writes. Default 8 MiB; below 64 fails the test.
func WithValueSize(n int) ContentionOption { return contentionFunc(func(c *contention) { c.size = n }) }

// RunContention is the large-value, high-contention case that [Run]'s small
// values cannot show: a store whose compare-and-swap is not atomic (it
// checks, then stores, in steps another write can come between) passes Run
// and fails here. In each round every writer, on a store of its own from
// newStore, Puts one large value with its own token, all at once, to one
// key, while an observer reads it. It checks that
//
//   - no stale write lands: the token the observer sees never goes down, and
//     after the round the key holds the highest token acknowledged (or a
//     higher one whose outcome was unknown);
//   - the round's highest token is never refused;
//   - every value read belongs, whole, to its token;
//   - errors are only [fence.ErrStale] and [fence.ErrUnknownOutcome].
//
// Each failing round is reported; the test runs on through every round so
// that the report says how often the store failed. It uses
// writers × size bytes of memory for the values.
func RunContention(t *testing.T, newStore NewStore, opts ...ContentionOption) {
	t.Helper()
	c := contention{writers: 12, rounds: 8, size: 8 << 20}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.writers < 2 || c.rounds < 1 || c.size < 64 {
		t.Fatalf("fencetest: RunContention: %d writers, %d rounds, %d-byte values: want at least 2, 1 and 64", c.writers, c.rounds, c.size)
	}
	stores := make([]fence.Store, c.writers+1)
	for i := range stores {
		stores[i] = newStore(t)
	}
	k := key(t)
	bufs := make([][]byte, c.writers)
	for w := range bufs {
		bufs[w] = make([]byte, c.size)
	}
	stop := make(chan struct{})
	observed := make(chan error, 1)
	go func() {
		owns := func(r fence.Record) bool { return belongs(r, c.size) }
		observed <- observe(t.Context(), stores[c.writers], k, stop, owns)
	}()
	failed := 0
	for r := range c.rounds {
		if !contentionRound(t, c, stores[:c.writers], bufs, k, r) {
			failed++
		}
	}
	close(stop)
	if err := <-observed; err != nil {
		t.Error(err)
	}
	if failed > 0 {
		t.Errorf("fencetest: %d of %d rounds failed", failed, c.rounds)
	}
}

// contentionRound runs round r and reports whether it passed.
func contentionRound(t *testing.T, c contention, stores []fence.Store, bufs [][]byte, k string, r int) bool {
	t.Helper()
	base := fence.Token(r * c.writers)
	errs := make([]error, c.writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range c.writers {
		tok := base + fence.Token(w+1)
		fill(bufs[w], tok)
		wg.Go(func() {
			<-start
			errs[w] = stores[w].Put(t.Context(), k, tok, bufs[w])
		})
	}
	close(start)
	wg.Wait()
	ok := true
	var acked, unknown fence.Token
	for w, err := range errs {
		tok := base + fence.Token(w+1)
		switch {
		case err == nil:
			acked = max(acked, tok)
		case errors.Is(err, fence.ErrUnknownOutcome):
			unknown = max(unknown, tok)
		case errors.Is(err, fence.ErrStale) && w < c.writers-1:
		default:
			t.Errorf("round %d: Put(token %d): got %v, want nil or fence.ErrStale (nil for the highest token)", r, tok, err)
			ok = false
		}
	}
	rec, err := stores[0].Get(t.Context(), k)
	switch {
	case err != nil:
		t.Errorf("round %d: Get after the round: %v", r, err)
		return false
	case !belongs(rec, c.size):
		t.Errorf("round %d: the key holds a value of %d bytes that does not belong to token %d", r, len(rec.Value), rec.Token)
		return false
	case rec.Token < acked || rec.Token > max(acked, unknown):
		t.Errorf("round %d: a stale write landed: the key holds token %d, want %d (the highest acknowledged)", r, rec.Token, acked)
		return false
	}
	return ok
}

// fill writes tok's value into b: a header naming the token, then bytes
// derived from it.
func fill(b []byte, tok fence.Token) {
	h := header(tok)
	copy(b, h)
	for i := len(h); i < len(b); i++ {
		b[i] = fillByte(tok, i)
	}
}

// belongs reports whether r.Value is, whole, the size-byte value fill wrote
// for r.Token; it samples the body every 4 KiB to stay cheap on large values.
func belongs(r fence.Record, size int) bool {
	h := header(r.Token)
	if len(r.Value) != size || !bytes.HasPrefix(r.Value, h) {
		return false
	}
	last := len(r.Value) - 1
	for i := len(h); i < len(r.Value); i += 4096 {
		if r.Value[i] != fillByte(r.Token, i) {
			return false
		}
	}
	return r.Value[last] == fillByte(r.Token, last)
}

func header(tok fence.Token) []byte {
	return []byte("fencetest token=" + strconv.FormatInt(int64(tok), 10) + ";")
}

func fillByte(tok fence.Token, i int) byte { return byte(int64(tok)*31 + int64(i/4096)) }
