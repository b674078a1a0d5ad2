package gcsfence_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

// Bad input gets a clear error before any I/O, never a panic.
func TestBadInput(t *testing.T) {
	c := client(t)
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"New nil client", second(gcsfence.New(nil, "b")), fence.ErrInvalidArgument},
		{"New empty bucket", second(gcsfence.New(c, "")), gcsfence.ErrInvalidArgument},
		{"New nil option", second(gcsfence.New(c, "b", nil)), gcsfence.ErrInvalidOption},
		{"New nil meter provider", second(gcsfence.New(c, "b", gcsfence.WithMeterProvider(nil))), gcsfence.ErrInvalidOption},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	s := newStore(t, gcsfence.WithPrefix(fencewant.Prefix(t)))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	var zero gcsfence.Store
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Put empty key", s.Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put token 0", s.Put(t.Context(), "k", 0, nil), fence.ErrInvalidToken},
		{"Put token -1", s.Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
		{"Put nil ctx", s.Put(nilCtx, "k", 1, nil), gcsfence.ErrInvalidArgument},
		{"Put cancelled", s.Put(cancelled, "k", 1, nil), context.Canceled},
		{"Put zero Store", zero.Put(t.Context(), "k", 1, nil), gcsfence.ErrInvalidArgument},
		{"Delete token 0", s.Delete(t.Context(), "k", 0), fence.ErrInvalidToken},
		{"Get empty key", second(s.Get(t.Context(), "")), fence.ErrInvalidKey},
		{"GetForUpdate token 0", second(s.GetForUpdate(t.Context(), "k", 0)), fence.ErrInvalidToken},
		{"Update nil fn", s.Update(t.Context(), "k", 1, nil), fence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("after refused calls: Get got %v, want ErrNotFound (nothing written)", err)
	}
}

func second[T any](_ T, err error) error { return err }

// An object this package did not write is reported, and left alone.
func TestCorrupt(t *testing.T) {
	c := client(t)
	p := fencewant.Prefix(t)
	w := c.Bucket(gcstest.Bucket).Object(p + "foreign").NewWriter(t.Context())
	w.Write([]byte("somebody else's bytes"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, c, gcsfence.WithPrefix(p))
	if _, err := s.Get(t.Context(), "foreign"); !errors.Is(err, gcsfence.ErrCorrupt) {
		t.Fatalf("Get of a foreign object: got %v, want ErrCorrupt", err)
	}
	if err := s.Put(t.Context(), "foreign", 5, []byte("v")); !errors.Is(err, gcsfence.ErrCorrupt) {
		t.Fatalf("Put over a foreign object: got %v, want ErrCorrupt", err)
	}
}

// Delete keeps the floor: the record is gone, a stale write is refused.
func TestDelete(t *testing.T) {
	s := newStore(t, gcsfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "k", 5, "a")
	if err := s.Delete(t.Context(), "k", 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Delete(4) after 5: got %v", err)
	}
	if err := s.Delete(t.Context(), "k", 6); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if err := s.Put(t.Context(), "k", 5, []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(5) after Delete(6): got %v, want ErrStale", err)
	}
	fencewant.Put(t, s, "k", 6, "b")
	fencewant.Record(t, s, "k", 6, "b")
}

// A bucket that does not exist is a clear error matching
// fence.ErrInvalidArgument, for every write. (A read of a missing object
// and of a missing bucket look alike, 404: Get says ErrNotFound.)
func TestNoBucket(t *testing.T) {
	s, err := gcsfence.New(client(t), "fencelock-no-such-bucket")
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Put":          s.Put(t.Context(), "k", 1, []byte("v")),
		"GetForUpdate": second(s.GetForUpdate(t.Context(), "k", 1)),
	} {
		if !errors.Is(err, gcsfence.ErrNoBucket) || !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%s in a bucket that does not exist: got %v, want ErrNoBucket", name, err)
		}
	}
}

// CheckPreconditions passes on the test server and catches one that
// ignores them: a proxy that strips ifGenerationMatch.
func TestCheckPreconditions(t *testing.T) {
	if err := newStore(t, gcsfence.WithPrefix(fencewant.Prefix(t))).CheckPreconditions(t.Context()); err != nil {
		t.Fatal(err)
	}
	strip := func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			r2 := r.Clone(r.Context())
			q := r2.URL.Query()
			q.Del("ifGenerationMatch")
			r2.URL.RawQuery = q.Encode()
			return next.RoundTrip(r2)
		})
	}
	s := mustNew(t, gcstest.New(t).Client(t, strip), gcsfence.WithPrefix(fencewant.Prefix(t)))
	if err := s.CheckPreconditions(t.Context()); !errors.Is(err, gcsfence.ErrPreconditionsUnsupported) {
		t.Fatalf("CheckPreconditions through a proxy that strips ifGenerationMatch: got %v", err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
