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
	"github.com/fencelock/fencelock/internal/childtest"
	"github.com/fencelock/fencelock/internal/s3test"
)

// The contention tests write 8 MiB values from 12 writers at once, so that
// a server whose conditional PUT checks the ETag and stores the body in
// separate steps shows it. versitygw must pass them. moto's server is the
// control that must fail them: it runs only when FENCELOCK_MOTO_SERVER
// names moto_server (see s3test.NewMoto), and is not part of CI's suite.

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
	fencetest.RunContention(t, contentionStores(s3srv.Server(t)))
}

// TestContentionCatchesMoto: RunContention against moto must fail its
// checks: a stale write lands, or a read finds the object half-stored (moto
// then answers a ranged GET with 416, and the read reports a foreign
// object). It runs in a child process, where the failure is the expected
// result.
func TestContentionCatchesMoto(t *testing.T) {
	if childtest.InChild() {
		fencetest.RunContention(t, contentionStores(s3test.NewMoto(t)), fencetest.WithRounds(12))
		return
	}
	s3test.NewMoto(t) // skips unless moto is enabled
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "rounds failed") && !strings.Contains(out, "observer:") {
		t.Fatalf("RunContention failed on moto, but not in its checks:\n%s", out)
	}
	t.Logf("moto, as expected:\n%s", lines(out, "round", "observer"))
}

// TestConditionalPutAtomic: in each round, 12 PUTs of 8 MiB with the same
// If-Match race; exactly one may succeed. The server's own record says how
// many did: the versions it created (a client may not see its answer: a
// server that refuses a PUT before reading its body resets the upload). moto,
// the control, lets several through.
func TestConditionalPutAtomic(t *testing.T) {
	const rounds = 4
	tests := []struct {
		name    string
		srv     func(t *testing.T) *s3test.Server
		control bool
	}{
		{"shared server", func(t *testing.T) *s3test.Server { return s3srv.Server(t) }, false},
		{"control, moto", func(t *testing.T) *s3test.Server { return s3test.NewMoto(t) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.srv(t)
			c := srv.Client(t, s3test.WithS3Options(func(o *s3.Options) { o.RetryMaxAttempts = 1 }))
			bucket, k := srv.VersionedBucket(t), key(t)
			bad := 0
			for r := range rounds {
				n := racePuts(t, c, bucket, k, contentionWriters, contentionSize)
				if n != 1 {
					bad++
					t.Logf("round %d: %d of %d PUTs with one If-Match succeeded", r, n, contentionWriters)
				}
			}
			switch {
			case !tt.control && bad > 0:
				t.Fatalf("%d of %d rounds had other than one PUT succeed, want none", bad, rounds)
			case tt.control && bad == 0:
				t.Fatalf("control: every round of %d had one PUT succeed; the test cannot tell an atomic server from moto", rounds)
			}
		})
	}
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

// lines returns the lines of out that contain any of subs.
func lines(out string, subs ...string) string {
	var b strings.Builder
	for l := range strings.Lines(out) {
		for _, s := range subs {
			if strings.Contains(l, s) {
				b.WriteString(l)
				break
			}
		}
	}
	return b.String()
}
