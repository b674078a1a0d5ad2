package etcdlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// TestIssuerNamed: a Lock of a Client with WithIssuer names it, and a
// Guard over it writes with it, so a store that checks issuers refuses a
// token of another source on its key, however high, and the Lock's own
// on a key of another source. Without WithIssuer (the control), the
// Lock names none and the other source's higher token lands over it,
// compared as if both came from one counter.
func TestIssuerNamed(t *testing.T) {
	t.Parallel()
	for _, named := range []bool{true, false} {
		t.Run(map[bool]string{true: "named", false: "control"}[named], func(t *testing.T) {
			var opts []etcdlock.Option
			if named {
				opts = append(opts, etcdlock.WithIssuer("orders-etcd"))
			}
			l, err := newLocker(t, etcdClient(t), opts...).Lock(t.Context(), "n")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(context.WithoutCancel(t.Context()))
			if got, want := l.Issuer(), map[bool]string{true: "orders-etcd"}[named]; got != want {
				t.Fatalf("Issuer: got %q, want %q", got, want)
			}
			s := fence.NewMemoryStore()
			g, err := fence.NewGuard(l)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Put(t.Context(), s, "k", []byte("from etcd")); err != nil {
				t.Fatal(err)
			}
			other, err := fence.NewHolder(l.Token()+1000, make(chan struct{}), fence.WithIssuer("redis:counter"))
			if err != nil {
				t.Fatal(err)
			}
			og, err := fence.NewGuard(other)
			if err != nil {
				t.Fatal(err)
			}
			err = og.Put(t.Context(), s, "k", []byte("from redis"))
			if !named {
				if err != nil {
					t.Fatalf("control: the other source's write: %v; want it to land (nothing tells the sources apart)", err)
				}
				return
			}
			if !errors.Is(err, fence.ErrIssuerMismatch) {
				t.Fatalf("the other source's write: got %v, want ErrIssuerMismatch", err)
			}
			if r, _ := s.Get(t.Context(), "k"); string(r.Value) != "from etcd" {
				t.Fatalf("value after the refusal: got %q, want %q", r.Value, "from etcd")
			}
		})
	}
}
