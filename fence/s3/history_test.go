package s3fence_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestConcurrentWritersServerHistory has 8 writers, each with its own client
// and cache like separate processes, hammer one key in a versioned bucket.
// The bucket's version list is the server's own record of every write it
// accepted: it must match what the writers were told, its tokens must never
// go down, and it must end with the highest token.
func TestConcurrentWritersServerHistory(t *testing.T) {
	const writers, rounds = 8, 10
	srv := s3test.New(t)
	bucket := srv.VersionedBucket(t)
	k := key(t)
	var (
		mu       sync.Mutex
		accepted = map[fence.Token]int{}
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for w := range writers {
		tok := fence.Token(w + 1)
		s := mustNew(t, srv.Client(t), bucket)
		wg.Go(func() {
			<-start
			for r := range rounds {
				err := s.Put(t.Context(), k, tok, fmt.Appendf(nil, "token %d round %d", tok, r))
				switch {
				case err == nil:
					mu.Lock()
					accepted[tok]++
					mu.Unlock()
				case !errors.Is(err, fence.ErrStale) || tok == writers:
					t.Errorf("writer %d: got %v, want nil or (below the top token) fence.ErrStale", tok, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	hist := history(t, client(t), bucket, k)
	if err := checkHistory(hist); err != nil {
		t.Fatal(err)
	}
	if got := hist[len(hist)-1]; got != writers {
		t.Errorf("last version: got token %d, want %d", got, writers)
	}
	for tok, n := range accepted {
		if got := count(hist, tok); got != n {
			t.Errorf("token %d: %d writes reported accepted, %d versions on the server", tok, n, got)
		}
	}
	t.Logf("server history (%d versions): %v", len(hist), hist)
}

// TestHistoryCheckControl: unfenced PUTs that let token 3 land after token 8
// leave a history that checkHistory rejects, so the check above can fail.
func TestHistoryCheckControl(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.VersionedBucket(t)
	k := key(t)
	c := client(t)
	for _, tok := range []fence.Token{8, 3} {
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(enveloped(tok, "unfenced")),
		})
		if err != nil {
			t.Fatalf("unfenced PutObject: got %v, want nil", err)
		}
	}
	hist := history(t, c, bucket, k)
	if err := checkHistory(hist); err == nil {
		t.Fatalf("history %v: got no error, want one (token 3 landed after 8)", hist)
	}
}

// history returns the tokens of every version of k, oldest first. S3 lists
// the versions of a key newest first.
func history(t *testing.T, c *s3.Client, bucket, k string) []fence.Token {
	t.Helper()
	var ids []string
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(k)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("ListObjectVersions: got %v, want nil", err)
		}
		for _, v := range page.Versions {
			if aws.ToString(v.Key) == k {
				ids = append(ids, aws.ToString(v.VersionId))
			}
		}
	}
	var toks []fence.Token
	for _, id := range slices.Backward(ids) {
		toks = append(toks, versionToken(t, c, bucket, k, id))
	}
	if len(toks) == 0 {
		t.Fatalf("no versions of %q", k)
	}
	return toks
}

func versionToken(t *testing.T, c *s3.Client, bucket, k, id string) fence.Token {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), VersionId: aws.String(id)})
	if err != nil {
		t.Fatalf("GetObject(%q, version %s): got %v, want nil", k, id, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s3fence.Decode(b)
	if err != nil {
		t.Fatalf("version %s: got %v, want an enveloped object", id, err)
	}
	return r.Token
}

// checkHistory reports the first place where a lower token landed after a
// higher one.
func checkHistory(hist []fence.Token) error {
	for i := 1; i < len(hist); i++ {
		if hist[i] < hist[i-1] {
			return fmt.Errorf("server history %v: token %d landed after %d (version %d)", hist, hist[i], hist[i-1], i)
		}
	}
	return nil
}

func count(hist []fence.Token, tok fence.Token) int {
	n := 0
	for _, h := range hist {
		if h == tok {
			n++
		}
	}
	return n
}
