package s3fence_test

import (
	"errors"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestDeleteKeepsFloor: B writes 34 and deletes the key; A's late Put(33)
// must be refused. The control deletes with a plain DeleteObject, as
// `aws s3 rm` or a lifecycle rule would: the floor goes with the object and
// A's stale write lands.
func TestDeleteKeepsFloor(t *testing.T) {
	tests := []struct {
		name   string
		fenced bool
	}{
		{"Store.Delete", true},
		{"control, plain DeleteObject", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			a, b := newStore(t), newStore(t)
			mustPut(t, b, k, 34, "b")
			if tt.fenced {
				if err := b.Delete(t.Context(), k, 34); err != nil {
					t.Fatalf("Delete(token 34): got %v, want nil", err)
				}
			} else {
				_, err := client(t).DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
				t.Fatalf("Get after the delete: got %v, want fence.ErrNotFound", err)
			}
			err := a.Put(t.Context(), k, 33, []byte("a"))
			if !tt.fenced {
				if err != nil {
					t.Fatalf("control: late Put(33): got %v, want nil (it lands)", err)
				}
				return
			}
			fencewant.Stale(t, err, 33, 34)
			if _, err := b.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
				t.Fatalf("Get after the refused Put: got %v, want fence.ErrNotFound", err)
			}
			mustPut(t, a, k, 35, "again")
			wantRecord(t, a, k, 35, "again")
		})
	}
}

// TestDeleteStale: a Delete with an older token than the object's is
// refused and leaves the record.
func TestDeleteStale(t *testing.T) {
	k := key(t)
	s := newStore(t)
	mustPut(t, s, k, 9, "v")
	fencewant.Stale(t, s.Delete(t.Context(), k, 8), 8, 9)
	wantRecord(t, s, k, 9, "v")
}

// TestTombstoneFormat: a tombstone is the documented header with kind 2 and
// no value; Decode reports it as not found.
func TestTombstoneFormat(t *testing.T) {
	k := key(t)
	s := newStore(t)
	if err := s.Delete(t.Context(), k, 7); err != nil {
		t.Fatalf("Delete: got %v, want nil", err)
	}
	out, err := client(t).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := len(b)
	want := enveloped(7, "")
	want[7] = 2
	if n != s3fence.HeaderSize || string(b[:16]) != string(want[:16]) {
		t.Errorf("tombstone bytes: got %q, want %q and a write ID", b[:n], want)
	}
	if _, err := s3fence.Decode(b[:n]); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("Decode(tombstone): got %v, want fence.ErrNotFound", err)
	}
}
