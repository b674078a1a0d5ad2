package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// counter is an UpdateFunc that increments a decimal counter (no value is 0)
// and counts its calls in *calls.
func counter(calls *int) fence.UpdateFunc {
	return func(old fence.Record) ([]byte, error) {
		*calls++
		n, err := strconv.Atoi(string(old.Value))
		if old.Value == nil {
			n, err = 0, nil
		}
		return strconv.AppendInt(nil, int64(n+1), 10), err
	}
}

// TestGetForUpdateTombstone: a key deleted by Store.Delete is claimed by
// raising its tombstone's token; it still reads as not found, and a Put
// below the claim is refused.
func TestGetForUpdateTombstone(t *testing.T) {
	k := key(t)
	s, other := newStore(t), newStore(t)
	mustPut(t, s, k, 3, "v")
	if err := s.Delete(t.Context(), k, 4); err != nil {
		t.Fatalf("Delete(token 4): got %v, want nil", err)
	}
	if _, err := s.GetForUpdate(t.Context(), k, 6); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate(token 6) of a tombstone: got %v, want fence.ErrNotFound", err)
	}
	if _, err := other.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after the claim: got %v, want fence.ErrNotFound", err)
	}
	fencewant.Stale(t, other.Put(t.Context(), k, 5, []byte("late")), 5, 6)
	_, err := other.GetForUpdate(t.Context(), k, 5)
	fencewant.Stale(t, err, 5, 6)
	mustPut(t, other, k, 6, "again")
	wantRecord(t, s, k, 6, "again")
}

// TestClaimWrites: a claim writes only when the token rises (one PUT),
// and Update then writes once more; with the key claimed, Update is one
// GET and one PUT.
func TestClaimWrites(t *testing.T) {
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	k := key(t)
	mustPut(t, s, k, 5, "0")
	calls := 0
	steps := []struct {
		name string
		do   func() error
		puts int
	}{
		{"GetForUpdate, same token", func() error { _, err := s.GetForUpdate(t.Context(), k, 5); return err }, 0},
		{"GetForUpdate, higher token", func() error { _, err := s.GetForUpdate(t.Context(), k, 7); return err }, 1},
		{"GetForUpdate, claimed", func() error { _, err := s.GetForUpdate(t.Context(), k, 7); return err }, 0},
		{"Update, claimed", func() error { return s.Update(t.Context(), k, 7, counter(&calls)) }, 1},
		{"Update, higher token", func() error { return s.Update(t.Context(), k, 8, counter(&calls)) }, 2},
	}
	for _, st := range steps {
		gets0, puts0 := f.counts()
		if err := st.do(); err != nil {
			t.Fatalf("%s: got %v, want nil", st.name, err)
		}
		gets, puts := f.counts()
		if gets-gets0 != 1 || puts-puts0 != st.puts {
			t.Errorf("%s: got %d GETs and %d PUTs, want 1 GET and %d PUTs", st.name, gets-gets0, puts-puts0, st.puts)
		}
	}
	wantRecord(t, s, k, 8, "2")
}

// TestClaimKeepsObjectSettings: the claim rewrites the value with its
// Content-Type and user metadata, and the new token in the metadata.
func TestClaimKeepsObjectSettings(t *testing.T) {
	k := key(t)
	s := newStore(t)
	err := s.PutWith(t.Context(), k, 4, []byte(`{}`), s3fence.WithContentType("application/json"),
		s3fence.WithMetadata(map[string]string{"owner": "billing"}))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetForUpdate(t.Context(), k, 5); err != nil || string(r.Value) != "{}" || r.Token != 5 {
		t.Fatalf("GetForUpdate(token 5): got %q, token %d, %v; want \"{}\", token 5, nil", r.Value, r.Token, err)
	}
	out, err := client(t).HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	if ct := aws.ToString(out.ContentType); ct != "application/json" {
		t.Errorf("Content-Type after the claim: got %q, want application/json", ct)
	}
	if m := out.Metadata; m["owner"] != "billing" || m[s3fence.MetadataToken] != "5" {
		t.Errorf("metadata after the claim: got %v, want owner=billing and %s=5", m, s3fence.MetadataToken)
	}
}

// TestClaimMultipart: the claim of an object above the multipart
// threshold rewrites it as a fenced multipart upload, value intact.
func TestClaimMultipart(t *testing.T) {
	k := key(t)
	s := newStore(t, multipartOpts...)
	value := bytes.Repeat([]byte("0123456789"), 600<<10) // 6,000 KiB: two parts
	if err := s.PutReader(t.Context(), k, 4, bytes.NewReader(value)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetForUpdate(t.Context(), k, 5); err != nil || !bytes.Equal(r.Value, value) || r.Token != 5 {
		t.Fatalf("GetForUpdate(token 5): got %d bytes, token %d, %v; want the %d bytes written, token 5, nil", len(r.Value), r.Token, err, len(value))
	}
	if r := mustGet(t, newStore(t), k); !bytes.Equal(r.Value, value) || r.Token != 5 {
		t.Fatalf("Get after the claim: got %d bytes, token %d; want the %d bytes written, token 5", len(r.Value), r.Token, len(value))
	}
}

// TestUpdateForeignObject: an object without the envelope is neither
// returned nor overwritten.
func TestUpdateForeignObject(t *testing.T) {
	k := key(t)
	s := newStore(t)
	c := client(t)
	bucket := s3test.New(t).Bucket
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: strings.NewReader("plain")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), k, 5); !errors.Is(err, s3fence.ErrForeignObject) {
		t.Errorf("GetForUpdate of a foreign object: got %v, want s3fence.ErrForeignObject", err)
	}
	calls := 0
	if err := s.Update(t.Context(), k, 5, counter(&calls)); !errors.Is(err, s3fence.ErrForeignObject) || calls != 0 {
		t.Errorf("Update of a foreign object: got %v and %d calls of fn, want s3fence.ErrForeignObject and none", err, calls)
	}
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: &k})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n != int64(len("plain")) {
		t.Errorf("foreign object after GetForUpdate and Update: %d bytes, want 5 (untouched)", n)
	}
}

// TestUpdateFnFails: fn's error is returned as it is and its value is not
// written; the claim stays.
func TestUpdateFnFails(t *testing.T) {
	k := key(t)
	s := newStore(t)
	mustPut(t, s, k, 4, "v")
	boom := errors.New("boom")
	if err := s.Update(t.Context(), k, 6, func(fence.Record) ([]byte, error) { return []byte("x"), boom }); err != boom {
		t.Fatalf("Update whose fn fails: got %v, want fn's error as it is", err)
	}
	wantRecord(t, s, k, 6, "v")
	fencewant.Stale(t, newStore(t).Put(t.Context(), k, 5, []byte("late")), 5, 6)
}

// TestUpdateInvalidInput: bad arguments, and a zero Store, are refused
// before any request.
func TestUpdateInvalidInput(t *testing.T) {
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	inc := counter(new(int))
	tests := []struct {
		name  string
		s     *s3fence.Store
		ctx   context.Context
		key   string
		token fence.Token
		fn    fence.UpdateFunc
		want  error
	}{
		{"nil context", s, nil, "k", 1, inc, fence.ErrInvalidArgument},
		{"key too long", s, t.Context(), strings.Repeat("k", 1025), 1, inc, fence.ErrInvalidKey},
		{"key not UTF-8", s, t.Context(), "k\xff", 1, inc, fence.ErrInvalidKey},
		{"zero token", s, t.Context(), "k", 0, inc, fence.ErrInvalidToken},
		{"nil function", s, t.Context(), "k", 1, nil, s3fence.ErrInvalidArgument},
		{"zero Store", &s3fence.Store{}, t.Context(), "k", 1, inc, s3fence.ErrInvalidArgument},
		{"nil Store", nil, t.Context(), "k", 1, inc, s3fence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Update(tt.ctx, tt.key, tt.token, tt.fn); !errors.Is(err, tt.want) {
				t.Errorf("Update: got %v, want an error matching %v", err, tt.want)
			}
			if tt.fn != nil {
				if _, err := tt.s.GetForUpdate(tt.ctx, tt.key, tt.token); !errors.Is(err, tt.want) {
					t.Errorf("GetForUpdate: got %v, want an error matching %v", err, tt.want)
				}
			}
		})
	}
	if gets, puts := f.counts(); gets != 0 || puts != 0 {
		t.Errorf("requests: got %d GETs and %d PUTs, want none", gets, puts)
	}
}
