package azblobfence_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// A server, or a proxy in front of it, that ignores If-Match and
// If-None-Match is caught before the first write, and nothing is
// written. The proxy strips the headers of every Put Blob (the client
// signs its requests with a SAS in the URL, so the request stays valid);
// the control sends them through: the check passes and the Put lands.
func TestConditionalWritesChecked(t *testing.T) {
	p := fencewant.Prefix(t)
	strip := func(r *http.Request) {
		if r.Method == http.MethodPut {
			r.Header.Del("If-Match")
			r.Header.Del("If-None-Match")
		}
	}
	s := mustNew(t, sasClient(t, strip), azblobfence.WithPrefix(p))
	if err := s.Put(t.Context(), "k", 5, []byte("v")); !errors.Is(err, azblobfence.ErrConditionalUnsupported) {
		t.Fatalf("Put through a proxy that strips the conditions: got %v, want ErrConditionalUnsupported", err)
	}
	if err := s.Update(t.Context(), "k", 5, func(fence.Record) ([]byte, error) { return []byte("u"), nil }); !errors.Is(err, azblobfence.ErrConditionalUnsupported) {
		t.Fatalf("Update through it: got %v, want ErrConditionalUnsupported", err)
	}
	if _, err := newStore(t, azblobfence.WithPrefix(p)).Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("after the refused writes: Get got %v, want ErrNotFound", err)
	}
	t.Run("control: conditions sent", func(t *testing.T) {
		s := mustNew(t, sasClient(t, nil), azblobfence.WithPrefix(fencewant.Prefix(t)))
		if err := s.CheckConditionalWrites(t.Context()); err != nil {
			t.Fatalf("CheckConditionalWrites: got %v, want nil", err)
		}
		fencewant.Put(t, s, "k", 5, "v")
	})
}

// sasClient returns a client of the test container authorised by a SAS in
// its URL, whose requests edit changes (nil: none) before they are sent.
func sasClient(t *testing.T, edit func(*http.Request)) *container.Client {
	t.Helper()
	perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true}
	u, err := client(t).GetSASURL(perms, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c, err := container.NewClientWithNoCredential(u, &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: editor{next: tr, edit: edit}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// editor changes requests before next sends them.
type editor struct {
	next http.RoundTripper
	edit func(*http.Request)
}

func (e editor) RoundTrip(r *http.Request) (*http.Response, error) {
	if e.edit != nil {
		r = r.Clone(r.Context())
		e.edit(r)
	}
	return e.next.RoundTrip(r)
}

// A Store checks the server once, before its first write, and not again
// once the check passed; with the check off, never.
func TestConditionalWritesCheckedOnce(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []azblobfence.Option
		probes int
	}{
		{"on", nil, 3},
		{"off", []azblobfence.Option{azblobfence.WithConditionalCheck(false)}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var probes atomic.Int32
			c := client(t, func(next http.RoundTripper) http.RoundTripper {
				return editor{next: next, edit: func(r *http.Request) {
					if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "fencelock-probe") {
						probes.Add(1)
					}
				}}
			})
			s := mustNew(t, c, append(tt.opts, azblobfence.WithPrefix(fencewant.Prefix(t)))...)
			for i := range 3 {
				fencewant.Put(t, s, "k", fence.Token(5+i), "v")
				if _, err := s.GetForUpdate(t.Context(), "k", fence.Token(5+i)); err != nil {
					t.Fatal(err)
				}
			}
			if got := probes.Load(); int(got) != tt.probes {
				t.Fatalf("probe writes: got %d, want %d", got, tt.probes)
			}
		})
	}
}
