package s3fence_test

import (
	"bytes"
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

// TestPutReader: the value is read from the reader's current offset to its
// end, streamed behind the envelope, and reads back whole.
func TestPutReader(t *testing.T) {
	s, k := newStore(t), key(t)
	value := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	r := bytes.NewReader(append([]byte("skipped"), value...))
	if _, err := r.Seek(int64(len("skipped")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.PutReader(t.Context(), k, 5, r); err != nil {
		t.Fatalf("PutReader: got %v, want nil", err)
	}
	got := mustGet(t, s, k)
	if got.Token != 5 || !bytes.Equal(got.Value, value) {
		t.Fatalf("Get: got token %d and %d bytes (equal %v), want token 5 and the %d-byte value", got.Token, len(got.Value), bytes.Equal(got.Value, value), len(value))
	}
	fencewant.Stale(t, s.PutReader(t.Context(), k, 4, bytes.NewReader([]byte("stale"))), 4, 5)
	if got := mustGet(t, s, k); !bytes.Equal(got.Value, value) {
		t.Fatalf("Get after the stale PutReader: got %d bytes, want the %d-byte value", len(got.Value), len(value))
	}
}

// TestPutReaderResendsAfterConflict: the first conditional PUT is refused
// (409) after its body was read; the retry sends the whole value again.
func TestPutReaderResendsAfterConflict(t *testing.T) {
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	k := key(t)
	mustPut(t, s, k, 3, "first")
	f.conflicts = 1
	value := bytes.Repeat([]byte("v"), 100<<10)
	if err := s.PutReader(t.Context(), k, 3, bytes.NewReader(value)); err != nil {
		t.Fatalf("PutReader after a refused PUT: got %v, want nil", err)
	}
	if _, puts := f.counts(); puts != 3 {
		t.Errorf("PUTs: got %d, want 3 (first, refused, retried)", puts)
	}
	if got := mustGet(t, s, k); !bytes.Equal(got.Value, value) {
		t.Fatalf("Get: got %d bytes, want the %d-byte value", len(got.Value), len(value))
	}
}

// TestPutReaderInvalid: a nil or unseekable value is refused before any
// request.
func TestPutReaderInvalid(t *testing.T) {
	tests := []struct {
		name  string
		value io.ReadSeeker
	}{
		{"nil", nil},
		{"typed nil", (*bytes.Reader)(nil)},
		{"unseekable", unseekable{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{}
			s := mustNew(t, c, "bucket")
			err := s.PutReader(t.Context(), "k", 1, tt.value)
			if !errors.Is(err, s3fence.ErrInvalidArgument) {
				t.Fatalf("PutReader: got %v, want an error matching s3fence.ErrInvalidArgument", err)
			}
			if c.calls != 0 {
				t.Errorf("requests sent: got %d, want 0", c.calls)
			}
		})
	}
}

// unseekable is a pipe-like reader: its Seek always fails.
type unseekable struct{}

func (unseekable) Read([]byte) (int, error)       { return 0, io.EOF }
func (unseekable) Seek(int64, int) (int64, error) { return 0, errors.New("illegal seek") }

// TestMultipartRefusedBeforeIO: a write that needs a multipart upload fails
// before any request when the client cannot make one, or when a PutOption
// sets a field CreateMultipartUpload has no counterpart for.
func TestMultipartRefusedBeforeIO(t *testing.T) {
	tests := []struct {
		name string
		opts []s3fence.PutOption
		want error
	}{
		{"client without multipart", nil, s3fence.ErrInvalidArgument},
		{"field multipart cannot carry", []s3fence.PutOption{s3fence.WithPutInput(func(in *s3.PutObjectInput) { in.WriteOffsetBytes = aws.Int64(1) })}, s3fence.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{}
			s := mustNew(t, c, "bucket", multipartOpts...)
			err := s.PutReader(t.Context(), "k", 1, bytes.NewReader(bigValue(0)), tt.opts...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("PutReader: got %v, want an error matching %v", err, tt.want)
			}
			if c.calls != 0 {
				t.Errorf("requests sent: got %d, want 0", c.calls)
			}
		})
	}
}

// TestPutReaderValueFails: reading the value fails part-way, in a single
// PUT and in a part. The request was cut short, so nothing was written:
// the error is the read's, not an unknown outcome, and the object is
// unchanged.
func TestPutReaderValueFails(t *testing.T) {
	diskErr := errors.New("disk error")
	for _, size := range []int{100 << 10, 2*partSize + 10} {
		t.Run(map[bool]string{false: "PutObject", true: "multipart"}[size > partSize], func(t *testing.T) {
			s, k := newStore(t, multipartOpts...), key(t)
			mustPut(t, s, k, 1, "before")
			r := &failingReader{ReadSeeker: bytes.NewReader(make([]byte, size)), after: int64(size) - 5, err: diskErr}
			err := s.PutReader(t.Context(), k, 2, r)
			if !errors.Is(err, diskErr) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("PutReader: got %v, want an error matching the read's and not fence.ErrUnknownOutcome", err)
			}
			wantRecord(t, s, k, 1, "before")
			wantNoUploads(t, k)
		})
	}
}

// failingReader fails every read that reaches offset after.
type failingReader struct {
	io.ReadSeeker
	after int64
	err   error
}

func (f *failingReader) Read(p []byte) (int, error) {
	pos, _ := f.Seek(0, io.SeekCurrent)
	if pos+int64(len(p)) > f.after {
		return 0, f.err
	}
	return f.ReadSeeker.Read(p)
}
