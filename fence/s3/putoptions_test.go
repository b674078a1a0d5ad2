package s3fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestPutWithObjectSettings: Content-Type, metadata and tags given to
// PutWith reach the object, beside the Store's own token metadata.
func TestPutWithObjectSettings(t *testing.T) {
	s, c, k := newStore(t), client(t), key(t)
	bucket := s3test.New(t).Bucket
	err := s.PutWith(t.Context(), k, 7, []byte(`{"a":1}`), s3fence.WithContentType("application/json"),
		s3fence.WithMetadata(map[string]string{"app": "billing"}), s3fence.WithTagging("team=payments"))
	if err != nil {
		t.Fatalf("PutWith: got %v, want nil", err)
	}
	head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &bucket, Key: &k})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(head.ContentType); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
	if head.Metadata["app"] != "billing" || head.Metadata[s3fence.MetadataToken] != "7" {
		t.Errorf("metadata: got %v, want app=billing and %s=7", head.Metadata, s3fence.MetadataToken)
	}
	tags, err := c.GetObjectTagging(t.Context(), &s3.GetObjectTaggingInput{Bucket: &bucket, Key: &k})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != "team" || aws.ToString(tags.TagSet[0].Value) != "payments" {
		t.Errorf("tags: got %v, want team=payments", tags.TagSet)
	}
	wantRecord(t, s, k, 7, `{"a":1}`)
}

// TestPutOptionsReachTheRequest: the Store's defaults, a call's options and
// the expected bucket owner are in the requests sent, with the Store's own
// fields (the condition, the body) untouched.
func TestPutOptionsReachTheRequest(t *testing.T) {
	c := &recordingClient{}
	s := mustNew(t, c, "bucket", s3fence.WithConditionalCheck(false), s3fence.WithExpectedBucketOwner("111122223333"),
		s3fence.WithPutDefaults(s3fence.WithServerSideEncryption(types.ServerSideEncryptionAwsKms, "key-1")))
	err := s.PutWith(t.Context(), "k", 3, []byte("v"), s3fence.WithStorageClass(types.StorageClassStandardIa),
		s3fence.WithPutInput(func(in *s3.PutObjectInput) { in.CacheControl = aws.String("no-store") }))
	if err != nil {
		t.Fatalf("PutWith: got %v, want nil", err)
	}
	in, get := c.put, c.get
	switch {
	case in.ServerSideEncryption != types.ServerSideEncryptionAwsKms || aws.ToString(in.SSEKMSKeyId) != "key-1":
		t.Errorf("SSE: got %q key %q, want aws:kms key-1", in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId))
	case in.StorageClass != types.StorageClassStandardIa || aws.ToString(in.CacheControl) != "no-store":
		t.Errorf("storage class, Cache-Control: got %q, %q, want STANDARD_IA, no-store", in.StorageClass, aws.ToString(in.CacheControl))
	case aws.ToString(in.ExpectedBucketOwner) != "111122223333" || aws.ToString(get.ExpectedBucketOwner) != "111122223333":
		t.Errorf("expected bucket owner: got %q on PUT, %q on GET, want 111122223333 on both",
			aws.ToString(in.ExpectedBucketOwner), aws.ToString(get.ExpectedBucketOwner))
	case aws.ToString(in.IfNoneMatch) != "*" || aws.ToInt64(in.ContentLength) != s3fence.HeaderSize+1:
		t.Errorf("Store's fields: got If-None-Match %q, length %d, want *, %d", aws.ToString(in.IfNoneMatch), aws.ToInt64(in.ContentLength), s3fence.HeaderSize+1)
	}
}

// TestPutOptionInvalid: options that would break fencing, or a nil one,
// fail the call before any request, and New when given as defaults, with an
// error matching ErrInvalidOption.
func TestPutOptionInvalid(t *testing.T) {
	set := func(fn func(*s3.PutObjectInput)) s3fence.PutOption { return s3fence.WithPutInput(fn) }
	tests := []struct {
		name string
		opt  s3fence.PutOption
	}{
		{"nil option", nil},
		{"nil function", s3fence.WithPutInput(nil)},
		{"token metadata", s3fence.WithMetadata(map[string]string{"Fence-Token": "99"})},
		{"If-Match", set(func(in *s3.PutObjectInput) { in.IfMatch = aws.String("x") })},
		{"key", set(func(in *s3.PutObjectInput) { in.Key = aws.String("other") })},
		{"checksum value", set(func(in *s3.PutObjectInput) { in.ChecksumSHA256 = aws.String("x") })},
		{"SSE-C", set(func(in *s3.PutObjectInput) { in.SSECustomerKey = aws.String("x") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{}
			s := mustNew(t, c, "bucket")
			if err := s.PutWith(t.Context(), "k", 1, []byte("v"), tt.opt); !errors.Is(err, s3fence.ErrInvalidOption) {
				t.Fatalf("PutWith: got %v, want an error matching s3fence.ErrInvalidOption", err)
			}
			if c.calls != 0 {
				t.Errorf("requests sent: got %d, want 0", c.calls)
			}
			if s, err := s3fence.New(c, "b", s3fence.WithPutDefaults(tt.opt)); s != nil || !errors.Is(err, s3fence.ErrInvalidOption) {
				t.Fatalf("New with WithPutDefaults: got (%v, %v), want (nil, an error matching s3fence.ErrInvalidOption)", s, err)
			}
		})
	}
}

// recordingClient keeps the last requests and answers as an empty bucket
// that accepts every PUT.
type recordingClient struct {
	mu  sync.Mutex
	get s3.GetObjectInput
	put s3.PutObjectInput
}

func (c *recordingClient) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.get = *in
	return nil, &types.NoSuchKey{}
}

func (c *recordingClient) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put = *in
	return &s3.PutObjectOutput{ETag: aws.String(`"e1"`)}, nil
}
