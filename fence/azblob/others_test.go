package azblobfence_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A blob another tool holds a lease on refuses writes without the lease
// id (412 LeaseIdMissing): Put, Delete and GetForUpdate fail with the
// server's error, neither stale nor an unknown outcome, and the record is
// left as it was.
func TestLeasedBlobRefused(t *testing.T) {
	p := fencewant.Prefix(t)
	c := client(t)
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	fencewant.Put(t, s, "k", 5, "a")
	lc, err := lease.NewBlobClient(c.NewBlockBlobClient(p+"k"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(t.Context(), -1, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = lc.BreakLease(t.Context(), nil) })
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"Put", s.Put(t.Context(), "k", 7, []byte("b"))},
		{"Delete", s.Delete(t.Context(), "k", 8)},
		{"GetForUpdate", second(s.GetForUpdate(t.Context(), "k", 9))},
	} {
		if tt.err == nil || errors.Is(tt.err, fence.ErrStale) || errors.Is(tt.err, fence.ErrUnknownOutcome) {
			t.Errorf("%s on a leased blob: got %v, want the server's refusal, neither stale nor unknown", tt.name, tt.err)
		}
	}
	fencewant.Record(t, s, "k", 5, "a")
}

// Writers with interleaved tokens, each through its own Store (its own
// ETag cache), race on one blob: every Put that returns nil carries a
// token at least as high as any acknowledged before it began, and the
// blob ends with the highest token acknowledged.
func TestInterleavedWriters(t *testing.T) {
	testenv.Long(t, "6 writers, 60 Puts on one blob")
	p := fencewant.Prefix(t)
	var highest atomic.Int64 // highest token acknowledged
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for w := range 6 {
		s := newStore(t, azblobfence.WithPrefix(p))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				tok := fence.Token(1 + (i*6+w*7)%60)
				floor := highest.Load()
				err := s.Put(t.Context(), "k", tok, []byte{byte(tok)})
				switch {
				case err == nil && int64(tok) < floor:
					errc <- errors.New("a Put acknowledged below a token acknowledged before it began")
				case err == nil:
					for old := highest.Load(); old < int64(tok) && !highest.CompareAndSwap(old, int64(tok)); old = highest.Load() {
					}
				case !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrConflict):
					errc <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	r, err := newStore(t, azblobfence.WithPrefix(p)).Get(t.Context(), "k")
	if err != nil || int64(r.Token) != highest.Load() {
		t.Fatalf("after the race: got token %d, %v; want %d", r.Token, err, highest.Load())
	}
}

// A SAS without the permissions a Store needs (read, create and write)
// makes its calls fail with the server's 403, neither stale nor an
// unknown outcome, and writes nothing.
func TestSASWithoutPermissions(t *testing.T) {
	p := fencewant.Prefix(t)
	c := client(t)
	full := mustNew(t, c, azblobfence.WithPrefix(p))
	fencewant.Put(t, full, "k", 5, "a")
	for _, tt := range []struct {
		name string
		perm sas.ContainerPermissions
	}{
		{"no read", sas.ContainerPermissions{Create: true, Write: true}},
		{"read only", sas.ContainerPermissions{Read: true}},
		{"no write", sas.ContainerPermissions{Read: true, Create: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, err := c.GetSASURL(tt.perm, time.Now().Add(time.Hour), nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			t.Cleanup(tr.CloseIdleConnections) // for goleak, with a server the tests do not stop
			sc, err := container.NewClientWithNoCredential(u, &container.ClientOptions{
				ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}},
			})
			if err != nil {
				t.Fatal(err)
			}
			s := mustNew(t, sc, azblobfence.WithPrefix(p))
			for _, k := range []string{"k", "new"} {
				err := s.Put(t.Context(), k, 7, []byte("b"))
				var re *azcore.ResponseError
				if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden || errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrUnknownOutcome) {
					t.Errorf("Put(%q): got %v, want the server's 403, neither stale nor unknown", k, err)
				}
			}
			fencewant.Record(t, full, "k", 5, "a")
			if _, err := full.Get(t.Context(), "new"); !errors.Is(err, fence.ErrNotFound) {
				t.Errorf(`Get("new"): got %v, want ErrNotFound`, err)
			}
		})
	}
}
