package s3fence_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The contention tests write 8 MiB values from 12 writers at once, so that
// a server whose conditional PUT checks the ETag and stores the body in
// separate steps shows it. versitygw must pass them. moto's server is the
// control that must fail them (contention_moto_test.go): built only with
// -tags moto, with FENCELOCK_MOTO_SERVER naming moto_server (see
// s3test.NewMoto), and not part of CI's suite.

const (
	contentionWriters = 12
	contentionSize    = 8 << 20
)

// contentionStores returns a NewStore giving each writer a store with its
// own client, like separate processes, able to retry past every other
// writer of a round.
func contentionStores(srv *s3test.Server) fencetest.NewStore {
	return func(t *testing.T) fence.Store {
		return mustNew(t, srv.Client(t), srv.Bucket, s3fence.WithMaxAttempts(contentionWriters+1))
	}
}

func TestContention(t *testing.T) {
	testenv.Long(t, "contention (about 5 s)")
	fencetest.RunContention(t, contentionStores(s3test.New(t)))
}

// TestConditionalPutAtomic: in each round, 12 PUTs of 8 MiB with the same
// If-Match race; exactly one may succeed. The server's own record says how
// many did: the versions it created (a client may not see its answer: a
// server that refuses a PUT before reading its body resets the upload). moto,
// the control (contention_moto_test.go), lets several through.
func TestConditionalPutAtomic(t *testing.T) {
	if bad := conditionalPutRounds(t, s3test.New(t)); bad > 0 {
		t.Fatalf("%d of %d rounds had other than one PUT succeed, want none", bad, putRounds)
	}
}

const putRounds = 4

// conditionalPutRounds races PUTs with one If-Match on srv and returns in
// how many rounds other than exactly one succeeded.
func conditionalPutRounds(t *testing.T, srv *s3test.Server) int {
	c := srv.Client(t, s3test.WithS3Options(func(o *s3.Options) { o.RetryMaxAttempts = 1 }))
	bucket, k := srv.VersionedBucket(t), key(t)
	bad := 0
	for r := range putRounds {
		n := racePuts(t, c, bucket, k, contentionWriters, contentionSize)
		if n != 1 {
			bad++
			t.Logf("round %d: %d of %d PUTs with one If-Match succeeded", r, n, contentionWriters)
		}
	}
	return bad
}

// racePuts writes k, then sends n PUTs of size bytes at once, each with the
// ETag it got as If-Match, and returns how many versions of k they created.
func racePuts(t *testing.T, c *s3.Client, bucket, k string, n, size int) int {
	t.Helper()
	ctx := t.Context()
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("base")})
	if err != nil {
		t.Fatal(err)
	}
	before := versions(t, c, bucket, k)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range n {
		body := bytes.Repeat([]byte{byte('a' + w)}, size)
		wg.Go(func() {
			<-start
			// Refusals and reset uploads are expected; the versions count.
			_, _ = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k),
				Body: bytes.NewReader(body), IfMatch: out.ETag})
		})
	}
	close(start)
	wg.Wait()
	return versions(t, c, bucket, k) - before
}

// versions counts the versions of k.
func versions(t *testing.T, c *s3.Client, bucket, k string) int {
	t.Helper()
	n := 0
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(k)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("listing versions of %s: %v", k, err)
		}
		for _, v := range page.Versions {
			if aws.ToString(v.Key) == k {
				n++
			}
		}
	}
	return n
}
