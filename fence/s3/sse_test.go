package s3fence_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestSSECustomerKey: with WithSSECustomerKey, every request of the Store
// that touches a fenced object (the reads before a write, the PUT, Get,
// Open, OpenRange, each step of a multipart upload but the abort) carries
// the key and its MD5. versitygw accepts and ignores SSE-C, so this checks
// what is sent, and that the writes and reads work with it; it cannot
// check that S3 encrypts.
func TestSSECustomerKey(t *testing.T) {
	cust := bytes.Repeat([]byte{0x5c}, 32)
	sum := md5.Sum(cust)
	wantKey, wantMD5 := base64.StdEncoding.EncodeToString(cust), base64.StdEncoding.EncodeToString(sum[:])
	rec := &headerRecorder{}
	opts := append([]s3fence.Option{s3fence.WithSSECustomerKey(cust)}, multipartOpts...)
	s := mustNew(t, client(t, rec.option()), s3test.New(t).Bucket, opts...)
	k := key(t)
	mustPut(t, s, k, 1, "small")
	mustPut(t, s, k, 2, "small again")
	wantRecord(t, s, k, 2, "small again")
	big := bigValue(3)
	if err := s.PutReader(t.Context(), k, 3, bytes.NewReader(big)); err != nil {
		t.Fatalf("multipart PutReader: got %v, want nil", err)
	}
	r, err := s.Open(t.Context(), k)
	if err != nil {
		t.Fatalf("Open: got %v, want nil", err)
	}
	r.Close()
	if r, err = s.OpenRange(t.Context(), k, 10, 10); err != nil {
		t.Fatalf("OpenRange: got %v, want nil", err)
	}
	r.Close()
	reqs := rec.requests()
	if len(reqs) < 8 {
		t.Fatalf("requests recorded: got %d, want at least 8", len(reqs))
	}
	for _, r := range reqs {
		if r.header.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != "AES256" ||
			r.header.Get("X-Amz-Server-Side-Encryption-Customer-Key") != wantKey ||
			r.header.Get("X-Amz-Server-Side-Encryption-Customer-Key-Md5") != wantMD5 {
			t.Errorf("%s: SSE-C headers missing or wrong: %v", r.what, r.header)
		}
	}
}

// TestSSECustomerKeyInvalid: a key that is not 32 bytes makes New fail.
func TestSSECustomerKeyInvalid(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33} {
		s, err := s3fence.New(&countingClient{}, "b", s3fence.WithSSECustomerKey(make([]byte, n)))
		if s != nil || !errors.Is(err, s3fence.ErrInvalidOption) || !strings.Contains(err.Error(), "32") {
			t.Errorf("New with a %d-byte key: got (%v, %v), want (nil, an error matching s3fence.ErrInvalidOption saying 32)", n, s, err)
		}
	}
}

// headerRecorder is an http.RoundTripper that keeps the headers of every
// request for a fenced object (not the probe's, not an abort).
type headerRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	what   string
	header http.Header
}

func (h *headerRecorder) option() s3test.ClientOption {
	return s3test.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper {
		h.next = rt
		return h
	})
}

func (h *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/"+s3fence.DefaultProbeKey) && req.Method != http.MethodDelete {
		h.mu.Lock()
		h.reqs = append(h.reqs, recordedRequest{req.Method + " " + req.URL.RequestURI(), req.Header.Clone()})
		h.mu.Unlock()
	}
	return h.next.RoundTrip(req)
}

func (h *headerRecorder) requests() []recordedRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reqs
}
