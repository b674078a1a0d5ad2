package azblobfence_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// viaProxy returns a client whose requests go to the shared server
// through a netproxy.Proxy, and the proxy.
func viaProxy(t *testing.T) (*container.Client, *netproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(azuritetest.New(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := netproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := client(t, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.URL.Host = p.Addr()
			return next.RoundTrip(r)
		})
	})
	return c, p
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A Put whose reply the network holds (the write applied), a newer
// token's write, then the connection reset: the Put reads back, finds
// token 9 and not its write, and says the outcome is unknown: never nil,
// never stale. Through a TCP proxy, as the network would do it. The
// control lets the SDK resend the write after the reset: the copy is
// refused by the newer write, and Put says stale of a write that landed.
func TestRepliesCutThenReset(t *testing.T) {
	p := fencewant.Prefix(t)
	run := func(t *testing.T) error {
		c, proxy := viaProxy(t)
		s := mustNew(t, c, azblobfence.WithPrefix(p))
		other := newStore(t, azblobfence.WithPrefix(p))
		k := key(t)
		fencewant.Put(t, s, k, 5, "a")
		proxy.CutReplies()
		errc := make(chan error, 1)
		go func() { errc <- s.Put(t.Context(), k, 7, []byte("b")) }()
		poll.Until(t, "the held Put applied", func() bool {
			r, err := other.Get(t.Context(), k)
			return err == nil && r.Token == 7
		})
		fencewant.Put(t, other, k, 9, "c")
		proxy.Reset()
		proxy.Heal()
		err := <-errc
		fencewant.Record(t, other, k, 9, "c")
		return err
	}
	fencewant.Unknown(t, run(t), 7)
	t.Run("control: resent", func(t *testing.T) {
		defer azblobfence.ResendForTest()()
		if err := run(t); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("resent: got %v, want ErrStale of a put that landed", err)
		}
	})
}
