package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// partSize is the smallest part S3 (and versitygw) accepts; multipart
// tests use it so that a few MiB make several parts.
const partSize = 5 << 20

// multipartOpts make every object above 5 MiB a multipart upload of 5 MiB
// parts.
var multipartOpts = []s3fence.Option{s3fence.WithMultipartThreshold(partSize), s3fence.WithPartSize(partSize)}

// bigValue is a value that makes three parts, different for each seed.
func bigValue(seed byte) []byte {
	v := make([]byte, 2*partSize+1000)
	for i := range v {
		v[i] = byte(i) ^ seed
	}
	return v
}

// TestMultipart: a large value goes as a multipart upload (the ETag says
// three parts) and reads back whole; a later one replaces it.
func TestMultipart(t *testing.T) {
	s, k := newStore(t, multipartOpts...), key(t)
	for _, tok := range []fence.Token{3, 4} {
		value := bigValue(byte(tok))
		if err := s.PutReader(t.Context(), k, tok, bytes.NewReader(value)); err != nil {
			t.Fatalf("PutReader(token %d): got %v, want nil", tok, err)
		}
		if got := mustGet(t, s, k); got.Token != tok || !bytes.Equal(got.Value, value) {
			t.Fatalf("Get: got token %d and %d bytes (equal %v), want token %d and the %d-byte value", got.Token, len(got.Value), bytes.Equal(got.Value, value), tok, len(value))
		}
		if etag := headETag(t, client(t), k); !strings.HasSuffix(strings.Trim(etag, `"`), "-3") {
			t.Errorf("ETag: got %s, want a three-part upload's (…-3)", etag)
		}
	}
	wantNoUploads(t, k)
}

// TestMultipartStaleComplete: A reads the object (token 3) and sends its
// parts; before A's CompleteMultipartUpload, B writes token 34. A's
// Complete, conditional on the ETag it read, is refused, and A's write is
// stale: the object keeps B's value and A's upload is aborted. The control
// strips the conditions from A's requests (and turns the check off): A's
// stale Complete lands over B's write.
func TestMultipartStaleComplete(t *testing.T) {
	tests := []struct {
		name      string
		strip     bool
		wantToken fence.Token
	}{
		{"conditional Complete", false, 34},
		{"control, conditions stripped", true, 33},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			b := newStore(t)
			mustPut(t, b, k, 3, "first")
			h := &completes{before: func() { mustPut(t, b, k, 34, "b") }}
			opts := []s3test.ClientOption{h.option()}
			aOpts := multipartOpts
			if tt.strip {
				opts = append(opts, s3test.WithS3Options(stripConditions))
				aOpts = append(aOpts, s3fence.WithConditionalCheck(false))
			}
			a := mustNew(t, client(t, opts...), s3test.New(t).Bucket, aOpts...)
			err := a.PutReader(t.Context(), k, 33, bytes.NewReader(bigValue(1)))
			if got := mustGet(t, b, k).Token; got != tt.wantToken {
				t.Fatalf("object's token after A's Complete: got %d, want %d", got, tt.wantToken)
			}
			if tt.strip {
				return
			}
			fencewant.Stale(t, err, 33, 34)
			wantRecord(t, b, k, 34, "b")
			wantNoUploads(t, k)
		})
	}
}

// TestMultipartCompleteRetried: A's Complete is refused because B, with a
// lower token, wrote in between; A reads again and completes the same
// upload, without sending the parts again.
func TestMultipartCompleteRetried(t *testing.T) {
	k := key(t)
	b := newStore(t)
	mustPut(t, b, k, 3, "first")
	h := &completes{before: func() { mustPut(t, b, k, 4, "b") }}
	a := mustNew(t, client(t, h.option()), s3test.New(t).Bucket, multipartOpts...)
	value := bigValue(7)
	if err := a.PutReader(t.Context(), k, 5, bytes.NewReader(value)); err != nil {
		t.Fatalf("PutReader: got %v, want nil", err)
	}
	if got := mustGet(t, b, k); got.Token != 5 || !bytes.Equal(got.Value, value) {
		t.Fatalf("Get: got token %d, %d bytes, want token 5 and A's value", got.Token, len(got.Value))
	}
	if parts, completes := h.counts(); parts != 3 || completes != 2 {
		t.Errorf("requests: got %d UploadPart and %d CompleteMultipartUpload, want 3 and 2", parts, completes)
	}
}

// TestMultipartOutcome: the Complete's answer is lost after the server
// applied it (Put reads back its own write: success), or the Complete never
// reaches the server (unknown outcome, the upload aborted, the object
// unchanged).
func TestMultipartOutcome(t *testing.T) {
	tests := []struct {
		name     string
		lose     func(*completes)
		landed   bool
		wantCall func(t *testing.T, err error)
	}{
		{"answer lost", func(h *completes) { h.loseAnswer = true }, true, func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("PutReader whose Complete's answer was lost: got %v, want nil (it landed)", err)
			}
		}},
		{"request lost", func(h *completes) { h.loseRequest = true }, false, func(t *testing.T, err error) {
			fencewant.Unknown(t, err, 9, s3fence.ErrConflict)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			h := &completes{}
			tt.lose(h)
			s := mustNew(t, client(t, h.option()), s3test.New(t).Bucket, multipartOpts...)
			mustPut(t, s, k, 8, "old")
			value := bigValue(9)
			tt.wantCall(t, s.PutReader(t.Context(), k, 9, bytes.NewReader(value)))
			if got := mustGet(t, s, k); tt.landed != (got.Token == 9) {
				t.Fatalf("object's token: got %d, want 9 if landed (%v), else 8", got.Token, tt.landed)
			}
			wantNoUploads(t, k)
		})
	}
}

// TestMultipartServerIgnoringConditions: a server that honours conditions on
// PutObject but not on CompleteMultipartUpload (simulated by stripping them
// from Complete only). The Store's multipart check refuses every multipart
// write; small writes go on.
func TestMultipartServerIgnoringConditions(t *testing.T) {
	k := key(t)
	s := mustNew(t, client(t, s3test.WithS3Options(stripCompleteConditions)), s3test.New(t).Bucket, multipartOpts...)
	mustPut(t, s, k, 3, "small")
	err := s.PutReader(t.Context(), k, 4, bytes.NewReader(bigValue(1)))
	if !errors.Is(err, s3fence.ErrConditionalUnsupported) {
		t.Fatalf("multipart PutReader: got %v, want s3fence.ErrConditionalUnsupported", err)
	}
	wantRecord(t, s, k, 3, "small")
	mustPut(t, s, k, 5, "small again")
	if err := newStore(t).CheckMultipartConditionalWrites(t.Context()); err != nil {
		t.Fatalf("CheckMultipartConditionalWrites on versitygw: got %v, want nil", err)
	}
}

// stripCompleteConditions removes If-Match and If-None-Match from
// CompleteMultipartUpload requests only.
func stripCompleteConditions(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("fencelockStripCompleteConditions",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok && isComplete(req.Request) {
					req.Header.Del("If-Match")
					req.Header.Del("If-None-Match")
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	})
}

// completes is an http.RoundTripper that counts UploadPart,
// CompleteMultipartUpload and AbortMultipartUpload requests, runs before ahead of the first
// Complete, and can lose the first Complete's request or answer.
type completes struct {
	next                    http.RoundTripper
	before                  func()
	loseRequest, loseAnswer bool
	// twice delivers the first Complete, loses its answer, runs between,
	// and answers as a server does to a second delivery of a Complete that
	// landed: 404 NoSuchUpload (AWS's documented answer for a completed
	// upload; versitygw answers 200 instead).
	twice   bool
	between func()

	mu                       sync.Mutex
	parts, completes, aborts int
}

func (h *completes) option() s3test.ClientOption {
	return s3test.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper {
		h.next = rt
		return h
	})
}

func isComplete(req *http.Request) bool {
	return req.Method == http.MethodPost && req.URL.Query().Has("uploadId")
}

func (h *completes) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/"+s3fence.DefaultProbeKey) {
		return h.next.RoundTrip(req)
	}
	h.mu.Lock()
	if req.Method == http.MethodPut && req.URL.Query().Has("partNumber") {
		h.parts++
	}
	if req.Method == http.MethodDelete && req.URL.Query().Has("uploadId") {
		h.aborts++
	}
	first := isComplete(req) && h.completes == 0
	if isComplete(req) {
		h.completes++
	}
	h.mu.Unlock()
	if !first {
		return h.next.RoundTrip(req)
	}
	if h.before != nil {
		h.before()
	}
	switch {
	case h.loseRequest:
		closeBody(req)
		return nil, errors.New("injected fault: connection reset before the request was sent")
	case h.loseAnswer:
		resp, err := h.next.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, errors.New("injected fault: connection reset after the request was sent")
	case h.twice:
		if resp, err := h.next.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if h.between != nil {
			h.between()
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>`
		return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: req}, nil
	}
	return h.next.RoundTrip(req)
}

func (h *completes) counts() (parts, completes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parts, h.completes
}

// wantNoUploads fails t if a multipart upload for k is still open.
func wantNoUploads(t *testing.T, k string) {
	t.Helper()
	out, err := client(t).ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(s3test.New(t).Bucket), Prefix: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Uploads); n != 0 {
		t.Fatalf("open multipart uploads for %s: got %d, want 0 (aborted)", k, n)
	}
}

// TestMultipartUploadGone: the upload is aborted by someone else (a
// lifecycle rule, an operator) before the Complete; the Complete fails with
// NoSuchUpload and the write starts a new upload, sending the parts again.
func TestMultipartUploadGone(t *testing.T) {
	k := key(t)
	bucket := s3test.New(t).Bucket
	other := client(t)
	h := &completes{before: func() {
		out, err := other.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &k})
		if err != nil || len(out.Uploads) != 1 {
			t.Errorf("listing the upload to abort: got %v uploads, %v, want 1", len(out.Uploads), err)
			return
		}
		if _, err := other.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &k, UploadId: out.Uploads[0].UploadId}); err != nil {
			t.Errorf("aborting the upload: %v", err)
		}
	}}
	s := mustNew(t, client(t, h.option()), bucket, multipartOpts...)
	value := bigValue(5)
	if err := s.PutReader(t.Context(), k, 2, bytes.NewReader(value)); err != nil {
		t.Fatalf("PutReader: got %v, want nil", err)
	}
	if got := mustGet(t, s, k); got.Token != 2 || !bytes.Equal(got.Value, value) {
		t.Fatalf("Get: got token %d, %d bytes, want token 2 and the value", got.Token, len(got.Value))
	}
	if parts, completes := h.counts(); parts != 6 || completes != 2 {
		t.Errorf("requests: got %d UploadPart and %d CompleteMultipartUpload, want 6 and 2", parts, completes)
	}
}

// TestMultipartCompleteDeliveredTwice: A's Complete lands but its answer is
// lost, and the SDK's or a proxy's second delivery of it is answered 404
// NoSuchUpload (the upload is completed). The upload being gone says
// nothing about whether A's write landed: A reads the object back. If it
// carries A's write, A succeeded; if a newer holder wrote meanwhile, A
// cannot tell whether its write landed before it, and says so (never
// ErrStale, which would claim nothing changed).
func TestMultipartCompleteDeliveredTwice(t *testing.T) {
	tests := []struct {
		name  string
		newer bool
	}{{"alone", false}, {"newer holder between", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			b := newStore(t)
			mustPut(t, b, k, 3, "first")
			h := &completes{twice: true}
			if tt.newer {
				h.between = func() { mustPut(t, b, k, 34, "b") }
			}
			s := mustNew(t, client(t, h.option()), s3test.New(t).Bucket, multipartOpts...)
			err := s.PutReader(t.Context(), k, 33, bytes.NewReader(bigValue(3)))
			if !tt.newer {
				if err != nil {
					t.Fatalf("PutReader: got %v, want nil (the write landed)", err)
				}
				if got := mustGet(t, s, k); got.Token != 33 {
					t.Fatalf("object's token: got %d, want 33", got.Token)
				}
				return
			}
			if errors.Is(err, fence.ErrStale) || !errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("PutReader: got %v, want an unknown outcome, not stale: the write landed before the newer one", err)
			}
			if got := mustGet(t, s, k); got.Token != 34 {
				t.Fatalf("object's token: got %d, want 34", got.Token)
			}
			wantNoUploads(t, k)
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.aborts != 0 {
				t.Errorf("%d AbortMultipartUpload requests for an upload the server said was gone, want 0", h.aborts)
			}
		})
	}
}
