package s3fence_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// pageClient is docs/s3.md's snippet: the client's endpoint, region and
// keys, and the bucket.
var pageClient = regexp.MustCompile(`newS3Client\("([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)"\)\nif err := createBucket\(ctx, client, "([^"]*)"\)`)

// docs/s3.md's "Try it on your machine" works as the page says: its shell
// line starts versitygw (on a free port, its buckets in a scratch
// directory), and the page's client, newS3Client with the snippet's
// endpoint and keys, and createBucket give a Store that writes with token
// 34 and refuses 33.
func TestPageTryIt(t *testing.T) {
	if _, err := s3test.FindVersitygw(); err != nil {
		testenv.Unavailable(t, err.Error(), s3test.HowToEnableVersitygw)
	}
	endpoint, region, accessKey, secretKey, bucket := pageSnippet(t)
	line := trypage.Line(t, "docs/s3.md", "versitygw")
	if !strings.Contains(line, " --access "+accessKey+" ") || !strings.Contains(line, " --secret "+secretKey+" ") {
		t.Fatalf("docs/s3.md: the server's line %q: want the snippet's keys, --access %s --secret %s", line, accessKey, secretKey)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var client *s3.Client
	trypage.Start(t, trypage.Run{
		Line: line, Port: "7070", Dir: "/tmp/vgw",
		Ready: func(ctx context.Context, port int) error {
			if client == nil {
				client = newS3Client(strings.Replace(endpoint, ":7070", ":"+strconv.Itoa(port), 1), region, accessKey, secretKey,
					func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: tr} })
			}
			return createBucket(ctx, client, bucket)
		},
	})
	store, err := s3fence.New(client, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), "invoice-42.json", 34, []byte("B")); err != nil {
		t.Fatalf("Put with token 34: got %v, want nil", err)
	}
	fencewant.Stale(t, store.Put(t.Context(), "invoice-42.json", 33, []byte("A")), 33, 34)
	if rec, err := store.Get(t.Context(), "invoice-42.json"); err != nil || rec.Token != 34 || string(rec.Value) != "B" {
		t.Fatalf("Get: got token %d %q %v, want token 34 \"B\"", rec.Token, rec.Value, err)
	}
}

// pageSnippet returns the arguments docs/s3.md's snippet gives
// newS3Client and createBucket.
func pageSnippet(t *testing.T) (endpoint, region, accessKey, secretKey, bucket string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(trypage.Root(t), "docs", "s3.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := pageClient.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("docs/s3.md: no snippet matching %s", pageClient)
	}
	return m[1], m[2], m[3], m[4], m[5]
}
