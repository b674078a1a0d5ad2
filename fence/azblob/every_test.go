package azblobfence_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// nthPut loses the reply of the n-th Put Blob its client sends from when
// it is armed.
type nthPut struct {
	httpfault.Transport
	armed atomic.Bool
	left  atomic.Int32
}

func (f *nthPut) wrap(next http.RoundTripper) http.RoundTripper {
	f.Next, f.Match = next, func(r *http.Request) bool {
		return r.Method == http.MethodPut && f.armed.Load() && f.left.Add(-1) == 0
	}
	return f
}

// lose arms the loss of the n-th Put Blob's reply, then calls then.
func (f *nthPut) lose(n int, then func()) {
	f.left.Store(int32(n))
	f.armed.Store(true)
	f.LoseNextReply(then)
}

// Every write of every call, its reply lost: with nothing written after
// it, the call reads its write back and succeeds; with a newer token's
// write landed after it, the call says the outcome is unknown, never
// stale, and the newer write stays.
func TestEveryWriteReplyLost(t *testing.T) {
	testenv.Long(t, "16 cases, each with a Store of its own: about 1 s (TestReplyLostSentOnce and TestReplyLostLanded stay in the fast tier)")
	inc := func(old fence.Record) ([]byte, error) { return append(old.Value, '+'), nil }
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, s, other *azblobfence.Store)
		nth   int // which of the call's Put Blobs loses its reply
		call  func(t *testing.T, s *azblobfence.Store) error
		want  string // the value after a call that succeeded
	}{
		{"Put of a new key", nil, 1,
			func(t *testing.T, s *azblobfence.Store) error { return s.Put(t.Context(), "k", 7, []byte("v")) }, "v"},
		{"Put on the cached ETag", func(t *testing.T, s, _ *azblobfence.Store) { fencewant.Put(t, s, "k", 5, "a") }, 1,
			func(t *testing.T, s *azblobfence.Store) error { return s.Put(t.Context(), "k", 7, []byte("v")) }, "v"},
		{"Put after its cached ETag was refused", func(t *testing.T, s, other *azblobfence.Store) {
			fencewant.Put(t, s, "k", 5, "a")
			fencewant.Put(t, other, "k", 5, "b")
		}, 2, func(t *testing.T, s *azblobfence.Store) error { return s.Put(t.Context(), "k", 7, []byte("v")) }, "v"},
		{"Delete", func(t *testing.T, s, _ *azblobfence.Store) { fencewant.Put(t, s, "k", 5, "a") }, 1,
			func(t *testing.T, s *azblobfence.Store) error { return s.Delete(t.Context(), "k", 7) }, ""},
		{"GetForUpdate of a new key", nil, 1, func(t *testing.T, s *azblobfence.Store) error {
			_, err := s.GetForUpdate(t.Context(), "k", 7)
			if errors.Is(err, fence.ErrNotFound) {
				return nil
			}
			return err
		}, ""},
		{"GetForUpdate of a lower token's value", func(t *testing.T, s, _ *azblobfence.Store) { fencewant.Put(t, s, "k", 5, "a") }, 1,
			func(t *testing.T, s *azblobfence.Store) error {
				_, err := s.GetForUpdate(t.Context(), "k", 7)
				return err
			}, "a"},
		{"Update's claim", func(t *testing.T, s, _ *azblobfence.Store) { fencewant.Put(t, s, "k", 5, "a") }, 1,
			func(t *testing.T, s *azblobfence.Store) error { return s.Update(t.Context(), "k", 7, inc) }, "a+"},
		{"Update's write", func(t *testing.T, s, _ *azblobfence.Store) { fencewant.Put(t, s, "k", 5, "a") }, 2,
			func(t *testing.T, s *azblobfence.Store) error { return s.Update(t.Context(), "k", 7, inc) }, "a+"},
	} {
		for _, newer := range []bool{false, true} {
			name := tt.name
			if newer {
				name += ", a newer write after it"
			}
			t.Run(name, func(t *testing.T) {
				p := fencewant.Prefix(t)
				var f nthPut
				s := mustNew(t, client(t, f.wrap), azblobfence.WithPrefix(p))
				other := newStore(t, azblobfence.WithPrefix(p))
				if tt.setup != nil {
					tt.setup(t, s, other)
				}
				if err := s.CheckConditionalWrites(t.Context()); err != nil {
					t.Fatal(err) // not the call's: the Store's check of the server is done before
				}
				then := func() {}
				if newer {
					then = func() { fencewant.Put(t, other, "k", 100, "newer") }
				}
				f.lose(tt.nth, then)
				err := tt.call(t, s)
				if f.armed.Load() && f.left.Load() > 0 {
					t.Fatalf("the call sent fewer than %d Put Blobs", tt.nth)
				}
				if newer {
					fencewant.Unknown(t, err, 7)
					fencewant.Record(t, other, "k", 100, "newer")
					return
				}
				if err != nil {
					t.Fatalf("got %v, want nil: the write landed, and its id says so", err)
				}
				if tt.want == "" {
					if _, err := other.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
						t.Fatalf("Get: got %v, want ErrNotFound", err)
					}
					fencewant.Stale(t, other.Put(t.Context(), "k", 6, []byte("x")), 6, 7)
					return
				}
				fencewant.Record(t, other, "k", 7, tt.want)
			})
		}
	}
}
