package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestABA plays the ETag ABA sequence. Holder A (token 33) writes; A is
// paused; holder B (token 34) takes over and rewrites byte-identical
// content; A wakes up and writes with If-Match set to the ETag of its own
// write. With the envelope B's rewrite has another ETag, and the S3 server
// refuses A's PUT.
func TestABA(t *testing.T) {
	same := []byte("same bytes")
	k := key(t)
	fa := &faults{}
	a := mustNew(t, faultyClient(t, fa), s3test.New(t).Bucket)
	b := newStore(t)
	raw := client(t)

	mustPut(t, a, k, 33, string(same))
	etagA := headETag(t, raw, k)
	mustPut(t, b, k, 34, string(same))
	if etagB := headETag(t, raw, k); etagB == etagA {
		t.Fatalf("ETag after B's byte-identical rewrite: got %s, the same as A's; want a new one", etagB)
	}
	err := a.Put(t.Context(), k, 33, []byte("A's late write"))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Current != 34 {
		t.Fatalf("A's late write: got %v, want a *fence.StaleError with Current 34", err)
	}
	if _, puts := fa.counts(); puts != 2 {
		t.Errorf("A's PUTs: got %d, want 2 (its write, and the late one the server refused on If-Match)", puts)
	}
	wantRecord(t, b, k, 34, string(same))
}

// TestABAControl is the same sequence with the token kept in user metadata
// only: B's rewrite keeps the ETag (the MD5 of the bytes), A's If-Match still
// matches, and A's stale write lands over B's.
func TestABAControl(t *testing.T) {
	same := []byte("same bytes")
	k := key(t)
	c := client(t)
	put := func(body []byte, tok string, cond func(*s3.PutObjectInput)) (string, error) {
		in := &s3.PutObjectInput{
			Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k),
			Body: bytes.NewReader(body), Metadata: map[string]string{"fence-token": tok},
		}
		cond(in)
		out, err := c.PutObject(t.Context(), in)
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ETag), nil
	}
	etagA, err := put(same, "33", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	if err != nil {
		t.Fatalf("A's write: got %v, want nil", err)
	}
	etagB, err := put(same, "34", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etagA) })
	if err != nil || etagB != etagA {
		t.Fatalf("B's rewrite: got ETag %s (%v), want A's %s unchanged", etagB, err, etagA)
	}
	if _, err := put([]byte("A's late write"), "33", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etagA) }); err != nil {
		t.Fatalf("A's late write without the envelope: got %v, want it to land (the hole)", err)
	}
	head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil || head.Metadata["fence-token"] != "33" {
		t.Fatalf("object after the control: got token %q (%v), want 33: A overwrote B", head.Metadata["fence-token"], err)
	}
}

func headETag(t *testing.T, c *s3.Client, k string) string {
	t.Helper()
	out, err := c.HeadObject(context.WithoutCancel(t.Context()), &s3.HeadObjectInput{Bucket: aws.String(s3test.New(t).Bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatalf("HeadObject(%q): got %v, want nil", k, err)
	}
	return aws.ToString(out.ETag)
}
