package s3fence_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestOpenRange: ranges of the value, the envelope not counted, clamped at
// its end; a bad offset, a tombstone and a missing key are errors.
func TestOpenRange(t *testing.T) {
	s, k := newStore(t), key(t)
	value := bigValue(4)[:1<<20]
	if err := s.Put(t.Context(), k, 6, value); err != nil {
		t.Fatal(err)
	}
	n := int64(len(value))
	tests := []struct {
		name           string
		offset, length int64
		want           []byte
	}{
		{"start", 0, 10, value[:10]},
		{"middle", 1000, 5000, value[1000:6000]},
		{"to the end", n - 5, -1, value[n-5:]},
		{"past the end, clamped", n - 5, 100, value[n-5:]},
		{"whole", 0, -1, value},
		{"empty", 7, 0, nil},
		{"at the end", n, -1, nil},
		{"beyond the end", n + 10, 5, nil},
		{"the longest length", 3, math.MaxInt64, value[3:]},
		{"the farthest offset", math.MaxInt64, 5, nil},
		{"the farthest offset, to the end", math.MaxInt64 - 1, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.OpenRange(t.Context(), k, tt.offset, tt.length)
			if err != nil {
				t.Fatalf("OpenRange(%d, %d): got %v, want nil", tt.offset, tt.length, err)
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, tt.want) || r.Token() != 6 || r.Size() != int64(len(tt.want)) {
				t.Fatalf("OpenRange(%d, %d): got %d bytes (equal %v), token %d, size %d, error %v; want %d bytes, token 6",
					tt.offset, tt.length, len(got), bytes.Equal(got, tt.want), r.Token(), r.Size(), err, len(tt.want))
			}
		})
	}
	if _, err := s.OpenRange(t.Context(), k, -1, 5); !errors.Is(err, s3fence.ErrInvalidArgument) {
		t.Errorf("OpenRange(-1, 5): got %v, want s3fence.ErrInvalidArgument", err)
	}
	if err := s.Delete(t.Context(), k, 7); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k, k + "-missing"} {
		if _, err := s.OpenRange(t.Context(), key, 0, 5); !errors.Is(err, fence.ErrNotFound) {
			t.Errorf("OpenRange(%q): got %v, want fence.ErrNotFound", key, err)
		}
	}
}

// TestOpenRangeOneVersion: a newer holder replaces the object between
// OpenRange's read of the header and its read of the range. The range read
// carries If-Match, so OpenRange starts again and returns the new token
// with the new bytes. The control strips If-Match: the old token comes back
// with the new version's bytes.
func TestOpenRangeOneVersion(t *testing.T) {
	tests := []struct {
		name      string
		strip     bool
		wantToken fence.Token
	}{
		{"If-Match", false, 2},
		{"control, If-Match stripped", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			w := newStore(t)
			mustPut(t, w, k, 1, "old-old-old")
			replaced := false
			hook := roundTripHook(func(req *http.Request) {
				if req.Header.Get("Range") != "bytes=32-" || replaced {
					return
				}
				replaced = true
				mustPut(t, w, k, 2, "new-new-new")
			})
			opts := []s3test.ClientOption{s3test.WithRoundTripper(hook)}
			if tt.strip {
				opts = append(opts, s3test.WithS3Options(stripConditions))
			}
			r, err := mustNew(t, client(t, opts...), s3test.New(t).Bucket).OpenRange(t.Context(), k, 0, -1)
			if err != nil {
				t.Fatalf("OpenRange: got %v, want nil", err)
			}
			defer r.Close()
			got, _ := io.ReadAll(r)
			if r.Token() != tt.wantToken || string(got) != "new-new-new" {
				t.Fatalf("OpenRange: got token %d with %q, want token %d with %q", r.Token(), got, tt.wantToken, "new-new-new")
			}
		})
	}
}

// roundTripHook runs fn before each request is sent.
func roundTripHook(fn func(*http.Request)) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			fn(req)
			return next.RoundTrip(req)
		})
	}
}
