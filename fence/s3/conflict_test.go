package s3fence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

func TestConflictIsRetriedAfterARead(t *testing.T) {
	f := &faults{conflicts: 3}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, s3fence.WithRetryDelay(0))
	k := key(t)
	if err := s.Put(t.Context(), k, 5, []byte("v")); err != nil {
		t.Fatalf("Put after 3 conflicts: got %v, want nil", err)
	}
	wantRecord(t, s, k, 5, "v")
	if gets, puts := f.counts(); puts != 4 || gets != 4+1 {
		t.Errorf("requests: got %d GETs and %d PUTs, want 5 GETs (4 reads, 1 Get) and 4 PUTs", gets, puts)
	}
}

func TestConflictRetriesExhausted(t *testing.T) {
	f := &faults{conflicts: 100}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, s3fence.WithMaxAttempts(3), s3fence.WithRetryDelay(0))
	k := key(t)
	err := s.Put(t.Context(), k, 5, []byte("v"))
	if !errors.Is(err, s3fence.ErrConflict) || errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Put under endless conflicts: got %v, want s3fence.ErrConflict only", err)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ConditionalRequestConflict" {
		t.Errorf("errors.As(err, smithy.APIError): got %v, want code ConditionalRequestConflict", apiErr)
	}
	if _, puts := f.counts(); puts != 3 {
		t.Errorf("PUTs: got %d, want 3 (WithMaxAttempts)", puts)
	}
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("Get after exhausted retries: got %v, want fence.ErrNotFound", err)
	}
}

// TestConflictThenNewerHolder: while our PUT is answered 409, a newer holder
// writes. The retry must read again and refuse, not overwrite the newer
// token. The control retries the PUT as it was, without the read, and
// overwrites it.
func TestConflictThenNewerHolder(t *testing.T) {
	tests := []struct {
		name      string
		fenced    bool
		wantToken fence.Token
	}{
		{"fenced", true, 9},
		{"control, retry without reading", false, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			newer := newStore(t)
			f := &faults{conflicts: 1}
			f.beforeFault = func() {
				if err := newer.Put(t.Context(), k, 9, []byte("newer")); err != nil {
					t.Errorf("newer holder's Put: got %v, want nil", err)
				}
			}
			c := faultyClient(t, f)
			var err error
			if tt.fenced {
				err = mustNew(t, c, s3test.New(t).Bucket).Put(t.Context(), k, 5, []byte("older"))
			} else {
				err = putRetryingBlindly(t, c, k, 5, "older")
			}
			if got := errors.Is(err, fence.ErrStale); got != tt.fenced {
				t.Fatalf("older holder's write: got %v, want stale %v", err, tt.fenced)
			}
			if r := mustGet(t, newer, k); r.Token != tt.wantToken {
				t.Fatalf("object: got token %d (%q), want %d", r.Token, r.Value, tt.wantToken)
			}
		})
	}
}

// putRetryingBlindly is the control: an unfenced PUT of an enveloped object
// that is re-sent unchanged until it stops failing.
func putRetryingBlindly(t *testing.T, c *s3.Client, k string, tok fence.Token, v string) error {
	t.Helper()
	var err error
	for range 3 {
		_, err = c.PutObject(t.Context(), &s3.PutObjectInput{
			Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k),
			Body: bytes.NewReader(enveloped(tok, v)),
		})
		if err == nil {
			return nil
		}
	}
	return err
}
