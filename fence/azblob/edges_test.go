package azblobfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
)

// Bad input gets a clear error before any I/O, never a panic.
func TestBadInput(t *testing.T) {
	var f httpfault.Transport // counts every request
	c := client(t, func(next http.RoundTripper) http.RoundTripper { f.Next = next; return &f })
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"New nil client", second(azblobfence.New(nil)), fence.ErrInvalidArgument},
		{"New typed nil client", second(azblobfence.New((*container.Client)(nil))), azblobfence.ErrInvalidArgument},
		{"New nil option", second(azblobfence.New(c, nil)), azblobfence.ErrInvalidOption},
		{"New nil meter provider", second(azblobfence.New(c, azblobfence.WithMeterProvider(nil))), azblobfence.ErrInvalidOption},
		{"New nil tracer provider", second(azblobfence.New(c, azblobfence.WithTracerProvider(nil))), azblobfence.ErrInvalidOption},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	s := mustNew(t, c, azblobfence.WithPrefix(fencewant.Prefix(t)))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	var zero azblobfence.Store
	var nilStore *azblobfence.Store
	long := strings.Repeat("k", 1025)
	inc := func(fence.Record) ([]byte, error) { return nil, nil }
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Put empty key", s.Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put key of 1025 characters", s.Put(t.Context(), long, 1, nil), fence.ErrInvalidKey},
		{"Put key not UTF-8", s.Put(t.Context(), "k\xff", 1, nil), fence.ErrInvalidKey},
		{"Put token 0", s.Put(t.Context(), "k", 0, nil), fence.ErrInvalidToken},
		{"Put token -1", s.Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
		{"Put nil ctx", s.Put(nilCtx, "k", 1, nil), azblobfence.ErrInvalidArgument},
		{"Put cancelled", s.Put(cancelled, "k", 1, nil), context.Canceled},
		{"Put zero Store", zero.Put(t.Context(), "k", 1, nil), azblobfence.ErrInvalidArgument},
		{"Put nil Store", nilStore.Put(t.Context(), "k", 1, nil), azblobfence.ErrInvalidArgument},
		{"Delete token 0", s.Delete(t.Context(), "k", 0), fence.ErrInvalidToken},
		{"Get empty key", second(s.Get(t.Context(), "")), fence.ErrInvalidKey},
		{"Get nil ctx", second(s.Get(nilCtx, "k")), azblobfence.ErrInvalidArgument},
		{"Get zero Store", second(zero.Get(t.Context(), "k")), azblobfence.ErrInvalidArgument},
		{"GetForUpdate token 0", second(s.GetForUpdate(t.Context(), "k", 0)), fence.ErrInvalidToken},
		{"GetForUpdate cancelled", second(s.GetForUpdate(cancelled, "k", 1)), context.Canceled},
		{"Update nil fn", s.Update(t.Context(), "k", 1, nil), azblobfence.ErrInvalidArgument},
		{"Update empty key", s.Update(t.Context(), "", 1, inc), fence.ErrInvalidKey},
		{"Update token 0", s.Update(t.Context(), "k", 0, inc), fence.ErrInvalidToken},
		{"Update nil ctx", s.Update(nilCtx, "k", 1, inc), azblobfence.ErrInvalidArgument},
		{"Update nil Store", nilStore.Update(t.Context(), "k", 1, inc), azblobfence.ErrInvalidArgument},
		{"CheckConditionalWrites nil ctx", s.CheckConditionalWrites(nilCtx), azblobfence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	if n := f.Sent(); n != 0 {
		t.Fatalf("requests sent by refused calls: %d, want 0", n)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("after refused calls: Get got %v, want ErrNotFound (nothing written)", err)
	}
}

func second[T any](_ T, err error) error { return err }

// A blob this package did not write is reported, and left alone.
func TestForeignBlob(t *testing.T) {
	c := client(t)
	p := fencewant.Prefix(t)
	if _, err := c.NewBlockBlobClient(p+"foreign").Upload(t.Context(), streaming.NopCloser(strings.NewReader("somebody else's bytes")), nil); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	if _, err := s.Get(t.Context(), "foreign"); !errors.Is(err, azblobfence.ErrForeignBlob) {
		t.Fatalf("Get of a foreign blob: got %v, want ErrForeignBlob", err)
	}
	if err := s.Put(t.Context(), "foreign", 5, []byte("v")); !errors.Is(err, azblobfence.ErrForeignBlob) {
		t.Fatalf("Put over a foreign blob: got %v, want ErrForeignBlob", err)
	}
	if _, err := s.GetForUpdate(t.Context(), "foreign", 5); !errors.Is(err, azblobfence.ErrForeignBlob) {
		t.Fatalf("GetForUpdate of a foreign blob: got %v, want ErrForeignBlob", err)
	}
	r, err := c.NewBlobClient(p+"foreign").DownloadStream(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if b, _ := io.ReadAll(r.Body); string(b) != "somebody else's bytes" {
		t.Fatalf("the foreign blob: got %q, want it unchanged", b)
	}
}

// A container that does not exist is named, for reads and writes.
func TestNoContainer(t *testing.T) {
	c, err := azuritetest.New(t).NewContainerClient("no-such-container", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, c)
	if err := s.Put(t.Context(), "k", 1, []byte("v")); !errors.Is(err, azblobfence.ErrNoContainer) {
		t.Fatalf("Put: got %v, want ErrNoContainer", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, azblobfence.ErrNoContainer) {
		t.Fatalf("Get: got %v, want ErrNoContainer", err)
	}
}

// The token in the metadata is covered by If-Match: a metadata-only
// change (Set Blob Metadata, here another writer's raising the token to
// 9) gives the blob a new ETag, so the Store's next Put, sent at once on
// the ETag it saw at its last write, is refused by the server, reads the
// blob, and is refused for its token.
func TestMetadataChangeRefusesCachedWrite(t *testing.T) {
	var f httpfault.Transport
	p := fencewant.Prefix(t)
	c := client(t, func(next http.RoundTripper) http.RoundTripper {
		f.Next, f.Match = next, func(r *http.Request) bool { return r.Method == http.MethodPut }
		return &f
	})
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	fencewant.Put(t, s, "k", 5, "a")
	bc := client(t).NewBlobClient(p + "k")
	props, err := bc.GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := props.Metadata
	for k := range meta {
		if strings.EqualFold(k, azblobfence.MetadataToken) {
			meta[k] = to("9")
		}
	}
	if _, err := bc.SetMetadata(t.Context(), meta, nil); err != nil {
		t.Fatal(err)
	}
	before := f.Sent()
	fencewant.Stale(t, s.Put(t.Context(), "k", 7, []byte("b")), 7, 9)
	if n := f.Sent() - before; n != 1 {
		t.Fatalf("Put Blob requests: %d, want 1 (on the cached ETag, refused by the server)", n)
	}
	fencewant.Record(t, s, "k", 9, "a")
}

func to(s string) *string { return &s }

// A 5xx answer to a write may come after the write reached the storage (a
// gateway's): the write is read back, and is nil when it landed, an
// unknown outcome when it did not.
func TestServerErrorReadBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		sent bool // the request reaches the server before the 503
	}{
		{"landed", true},
		{"not landed", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f httpfault.Transport
			c := client(t, func(next http.RoundTripper) http.RoundTripper {
				f.Next, f.Match = next, func(r *http.Request) bool { return r.Method == http.MethodPut }
				return &f
			})
			s := mustNew(t, c, azblobfence.WithPrefix(fencewant.Prefix(t)))
			fencewant.Put(t, s, "k", 5, "a")
			f.FailNext(http.StatusServiceUnavailable, tt.sent)
			err := s.Put(t.Context(), "k", 7, []byte("b"))
			if tt.sent {
				if err != nil {
					t.Fatalf("Put answered 503 after it landed: got %v, want nil", err)
				}
				fencewant.Record(t, s, "k", 7, "b")
				return
			}
			fencewant.Unknown(t, err, 7)
			fencewant.Record(t, s, "k", 5, "a")
		})
	}
}
