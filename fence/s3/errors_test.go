package s3fence_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

func TestNewRejects(t *testing.T) {
	c := &countingClient{}
	bad, arg := s3fence.ErrInvalidOption, s3fence.ErrInvalidArgument
	tests := []struct {
		name   string
		client s3fence.Client
		bucket string
		opts   []s3fence.Option
		want   error
	}{
		{"nil client", nil, "b", nil, arg},
		{"typed nil *s3.Client", (*s3.Client)(nil), "b", nil, arg},
		{"typed nil of another Client", (*countingClient)(nil), "b", nil, arg},
		{"empty bucket", c, "", nil, arg},
		{"nil option", c, "b", []s3fence.Option{nil}, bad},
		{"zero attempts", c, "b", []s3fence.Option{s3fence.WithMaxAttempts(0)}, bad},
		{"negative cache", c, "b", []s3fence.Option{s3fence.WithCacheSize(-1)}, bad},
		{"negative retry delay", c, "b", []s3fence.Option{s3fence.WithRetryDelay(-time.Millisecond)}, bad},
		{"negative put grace", c, "b", []s3fence.Option{s3fence.WithPutGrace(-time.Second)}, bad},
		{"empty probe key", c, "b", []s3fence.Option{s3fence.WithProbeKey("")}, bad},
		{"probe key not UTF-8", c, "b", []s3fence.Option{s3fence.WithProbeKey("k\xff")}, bad},
		{"empty bucket owner", c, "b", []s3fence.Option{s3fence.WithExpectedBucketOwner("")}, bad},
		{"nil put default", c, "b", []s3fence.Option{s3fence.WithPutDefaults(nil)}, bad},
		{"invalid put default", c, "b", []s3fence.Option{s3fence.WithPutDefaults(s3fence.WithPutInput(nil))}, bad},
		{"multipart threshold under 5 MiB", c, "b", []s3fence.Option{s3fence.WithMultipartThreshold(5<<20 - 1)}, bad},
		{"multipart threshold over 5 GiB", c, "b", []s3fence.Option{s3fence.WithMultipartThreshold(5<<30 + 1)}, bad},
		{"part size under 5 MiB", c, "b", []s3fence.Option{s3fence.WithPartSize(1 << 20)}, bad},
		{"part size over 5 GiB", c, "b", []s3fence.Option{s3fence.WithPartSize(6 << 30)}, bad},
		{"SSE-C key of 16 bytes", c, "b", []s3fence.Option{s3fence.WithSSECustomerKey(make([]byte, 16))}, bad},
		{"later option invalid", c, "b", []s3fence.Option{s3fence.WithCacheSize(1), s3fence.WithMaxAttempts(-1)}, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *s3fence.Store
			err := nilchecktest.NoPanic(func() (err error) { s, err = s3fence.New(tt.client, tt.bucket, tt.opts...); return err })
			if s != nil || !errors.Is(err, tt.want) {
				t.Fatalf("New: got (%v, %v), want (nil, an error matching %v)", s, err, tt.want)
			}
		})
	}
}

// TestBadInputBeforeIO: invalid keys and tokens and a cancelled or nil
// context are refused with an error, not a panic, before any request is sent
// (TestNilContext covers the other entry points).
func TestBadInputBeforeIO(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		key   string
		token fence.Token
		want  error
	}{
		{"empty key", t.Context(), "", 1, fence.ErrInvalidKey},
		{"key too long", t.Context(), strings.Repeat("k", 1025), 1, fence.ErrInvalidKey},
		{"key not UTF-8", t.Context(), "k\xff", 1, fence.ErrInvalidKey},
		{"zero token", t.Context(), "k", 0, fence.ErrInvalidToken},
		{"negative token", t.Context(), "k", -1, fence.ErrInvalidToken},
		{"cancelled context", cancelled, "k", 1, context.Canceled},
		{"nil context", nil, "k", 1, s3fence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{}
			s := mustNew(t, c, "bucket")
			if err := s.Put(tt.ctx, tt.key, tt.token, []byte("v")); !errors.Is(err, tt.want) {
				t.Errorf("Put: got %v, want an error matching %v", err, tt.want)
			}
			if tt.token > 0 {
				if _, err := s.Get(tt.ctx, tt.key); !errors.Is(err, tt.want) {
					t.Errorf("Get: got %v, want an error matching %v", err, tt.want)
				}
				if _, err := s.Open(tt.ctx, tt.key); !errors.Is(err, tt.want) {
					t.Errorf("Open: got %v, want an error matching %v", err, tt.want)
				}
			}
			if c.calls != 0 {
				t.Errorf("requests sent: got %d, want 0", c.calls)
			}
		})
	}
}

// TestNilContext: every entry point that takes a context refuses a nil one
// with an error matching ErrInvalidArgument, never a panic, before any
// request.
func TestNilContext(t *testing.T) {
	var nilCtx context.Context
	tests := []struct {
		name string
		call func(*s3fence.Store) error
	}{
		{"Put", func(s *s3fence.Store) error { return s.Put(nilCtx, "k", 1, []byte("v")) }},
		{"PutWith", func(s *s3fence.Store) error { return s.PutWith(nilCtx, "k", 1, []byte("v")) }},
		{"Get", func(s *s3fence.Store) error { _, err := s.Get(nilCtx, "k"); return err }},
		{"Open", func(s *s3fence.Store) error { _, err := s.Open(nilCtx, "k"); return err }},
		{"Delete", func(s *s3fence.Store) error { return s.Delete(nilCtx, "k", 1) }},
		{"CheckConditionalWrites", func(s *s3fence.Store) error { return s.CheckConditionalWrites(nilCtx) }},
		{"PutReader", func(s *s3fence.Store) error { return s.PutReader(nilCtx, "k", 1, bytes.NewReader(nil)) }},
		{"OpenRange", func(s *s3fence.Store) error { _, err := s.OpenRange(nilCtx, "k", 0, 1); return err }},
		{"CheckMultipartConditionalWrites", func(s *s3fence.Store) error { return s.CheckMultipartConditionalWrites(nilCtx) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{}
			s := mustNew(t, c, "bucket")
			if err := nilchecktest.NoPanic(func() error { return tt.call(s) }); !errors.Is(err, s3fence.ErrInvalidArgument) {
				t.Fatalf("%s(nil ctx): got %v, want an error matching s3fence.ErrInvalidArgument", tt.name, err)
			}
			if c.calls != 0 {
				t.Errorf("requests sent: got %d, want 0", c.calls)
			}
		})
	}
}

// TestNoSuchBucket: a Store on a bucket that does not exist says so,
// leading with the bucket's name, not the key of the request (on the first
// Put, the conditional-write probe's).
func TestNoSuchBucket(t *testing.T) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	bucket := "fencelock-missing-" + hex.EncodeToString(b[:])
	s := mustNew(t, client(t), bucket)
	wantLead := fmt.Sprintf("s3fence: no such bucket %q (", bucket)
	err := s.Put(t.Context(), key(t), 1, []byte("v"))
	wantWrapped(t, "Put", err, s3fence.ErrNoSuchBucket, "NoSuchBucket")
	if !strings.HasPrefix(err.Error(), wantLead) {
		t.Errorf("Put: got %q, want it to begin %q", err, wantLead)
	}
	_, err = s.Get(t.Context(), key(t))
	wantWrapped(t, "Get", err, s3fence.ErrNoSuchBucket, "NoSuchBucket")
	if !strings.HasPrefix(err.Error(), wantLead) {
		t.Errorf("Get: got %q, want it to begin %q", err, wantLead)
	}
}

func TestAccessDenied(t *testing.T) {
	srv := s3test.New(t)
	accessKey := srv.AccessKey
	if accessKey == "" { // an endpoint on the default credential chain: use a key that does not exist
		accessKey = "FENCELOCKNOSUCHKEY"
	}
	c := client(t, s3test.WithS3Options(func(o *s3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(accessKey, "not-the-secret", "")
	}))
	s := mustNew(t, c, srv.Bucket)
	err := s.Put(t.Context(), key(t), 1, []byte("v"))
	wantWrapped(t, "Put", err, s3fence.ErrAccessDenied, "")
	_, err = s.Get(t.Context(), key(t))
	wantWrapped(t, "Get", err, s3fence.ErrAccessDenied, "")
}

// TestForeignObject: objects that did not come from a Store are neither
// overwritten nor returned.
func TestForeignObject(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"plain bytes", []byte("a plain object, written without fencing")},
		{"empty", nil},
		{"short envelope", enveloped(5, "")[:20]},
		{"unknown version", append([]byte("fencelk\x03"), enveloped(5, "v")[8:]...)},
		{"zero token", enveloped(0, "v")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			c := client(t)
			_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k), Body: bytes.NewReader(tt.body)})
			if err != nil {
				t.Fatal(err)
			}
			s := mustNew(t, c, s3test.New(t).Bucket)
			if err := s.Put(t.Context(), k, 9, []byte("v")); !errors.Is(err, s3fence.ErrForeignObject) {
				t.Errorf("Put over it: got %v, want s3fence.ErrForeignObject", err)
			}
			if _, err := s.Get(t.Context(), k); !errors.Is(err, s3fence.ErrForeignObject) {
				t.Errorf("Get: got %v, want s3fence.ErrForeignObject", err)
			}
		})
	}
}

// TestObjectFormat reads an object back without the Store: the documented
// envelope, and the token in user metadata.
func TestObjectFormat(t *testing.T) {
	k := key(t)
	mustPut(t, newStore(t), k, 42, "value")
	out, err := client(t).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(out.Body); err != nil {
		t.Fatal(err)
	}
	want := enveloped(42, "value")
	got := b.Bytes()
	if len(got) != len(want) || !bytes.Equal(got[:16], want[:16]) || !bytes.Equal(got[32:], want[32:]) {
		t.Errorf("object bytes: got %q, want %q with a write ID in bytes 16–31", got, want)
	}
	if r, err := s3fence.Decode(got); err != nil || r.Token != 42 || string(r.Value) != "value" {
		t.Errorf("Decode: got token %d value %q (%v), want 42 %q", r.Token, r.Value, err, "value")
	}
	if m := out.Metadata[s3fence.MetadataToken]; m != "42" {
		t.Errorf("metadata %s: got %q, want %q", s3fence.MetadataToken, m, "42")
	}
}

func wantWrapped(t *testing.T, op string, err, sentinel error, code string) {
	t.Helper()
	var apiErr smithy.APIError
	if !errors.Is(err, sentinel) || !errors.As(err, &apiErr) {
		t.Fatalf("%s: got %v, want an error matching %v that wraps a smithy.APIError", op, err, sentinel)
	}
	if code != "" && apiErr.ErrorCode() != code {
		t.Errorf("%s: API error code: got %s, want %s", op, apiErr.ErrorCode(), code)
	}
}

// countingClient is an s3fence.Client that counts calls and fails them.
type countingClient struct{ calls int }

func (c *countingClient) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.calls++
	return nil, errors.New("countingClient: no I/O expected")
}

func (c *countingClient) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.calls++
	return nil, errors.New("countingClient: no I/O expected")
}

// TestTailReadsValue: the shell recipe of the package documentation,
// tail -c +33, turns an object's bytes into the value.
func TestTailReadsValue(t *testing.T) {
	k := key(t)
	mustPut(t, newStore(t), k, 42, "the value\n")
	out, err := client(t).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	cmd := exec.CommandContext(t.Context(), "tail", "-c", "+33")
	cmd.Stdin = out.Body
	got, err := cmd.Output()
	if err != nil || string(got) != "the value\n" {
		t.Fatalf("tail -c +33: got %q (%v), want %q", got, err, "the value\n")
	}
}

// TestZeroValues: a zero or nil Store, made without New, is refused with an
// error matching ErrInvalidArgument, never a panic.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	var nilStore *s3fence.Store
	for name, s := range map[string]*s3fence.Store{"zero": {}, "nil": nilStore} {
		for call, f := range map[string]func() error{
			"Put":                             func() error { return s.Put(ctx, "k", 1, []byte("v")) },
			"PutWith":                         func() error { return s.PutWith(ctx, "k", 1, []byte("v")) },
			"PutReader":                       func() error { return s.PutReader(ctx, "k", 1, bytes.NewReader(nil)) },
			"Get":                             func() error { _, err := s.Get(ctx, "k"); return err },
			"Open":                            func() error { _, err := s.Open(ctx, "k"); return err },
			"OpenRange":                       func() error { _, err := s.OpenRange(ctx, "k", 0, 1); return err },
			"Delete":                          func() error { return s.Delete(ctx, "k", 1) },
			"CheckConditionalWrites":          func() error { return s.CheckConditionalWrites(ctx) },
			"CheckMultipartConditionalWrites": func() error { return s.CheckMultipartConditionalWrites(ctx) },
		} {
			if err := nilchecktest.NoPanic(f); !errors.Is(err, s3fence.ErrInvalidArgument) {
				t.Errorf("%s on a %s Store: got %v, want an error matching ErrInvalidArgument", call, name, err)
			}
		}
	}
	// A failed Open returns a nil Reader; its Close deferred before the
	// error is checked, or a Read, must not panic.
	var nilReader *s3fence.Reader
	for name, r := range map[string]*s3fence.Reader{"zero": {}, "nil": nilReader} {
		for call, f := range map[string]func() error{
			"Read":  func() error { _, err := r.Read(make([]byte, 1)); return err },
			"Close": func() error { return r.Close() },
		} {
			if err := nilchecktest.NoPanic(f); !errors.Is(err, s3fence.ErrInvalidArgument) {
				t.Errorf("%s on a %s Reader: got %v, want an error matching ErrInvalidArgument", call, name, err)
			}
		}
	}
}
