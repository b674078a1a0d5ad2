package gcsfence_test

import (
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

// docs/gcs.md's client, newEmulatorClient, through STORAGE_EMULATOR_HOST
// against fake-gcs-server (the same server the standalone binary runs,
// with its default -public-host): a Store writes, reads, updates and
// refuses an older token. The control, the same client without
// storage.WithJSONReads, reads a record that is there as missing: the
// server answers its XML reads 404.
func TestEmulatorClient(t *testing.T) {
	srv := gcstest.New(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	t.Run("page", func(t *testing.T) {
		c, err := newEmulatorClient(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := newStoreOf(t, c)
		if err := s.Put(t.Context(), "k", 34, []byte("b")); err != nil {
			t.Fatalf("Put: got %v, want nil", err)
		}
		if err := s.Update(t.Context(), "k", 34, func(r fence.Record) ([]byte, error) { return append(r.Value, '!'), nil }); err != nil {
			t.Fatalf("Update: got %v, want nil", err)
		}
		fencewant.Stale(t, s.Put(t.Context(), "k", 33, []byte("a")), 33, 34)
		if r, err := s.Get(t.Context(), "k"); err != nil || r.Token != 34 || string(r.Value) != "b!" {
			t.Fatalf("Get: got token %d %q %v, want token 34 \"b!\"", r.Token, r.Value, err)
		}
	})
	t.Run("control: XML reads", func(t *testing.T) {
		c, err := storage.NewClient(t.Context(), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := newStoreOf(t, c)
		if err := s.Put(t.Context(), "k", 5, []byte("v")); err != nil {
			t.Fatalf("Put: got %v, want nil", err)
		}
		if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Get through XML reads: got %v, want ErrNotFound (the server's 404); if the server now serves them, docs/gcs.md's note on WithJSONReads is out of date", err)
		}
	})
}

func newStoreOf(t *testing.T, c *storage.Client) *gcsfence.Store {
	t.Helper()
	s, err := gcsfence.New(c, gcstest.Bucket, gcsfence.WithPrefix(fencewant.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
