package s3test_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerServesBucketAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := s3test.Start(ctx, t.TempDir())
	if errors.Is(err, s3test.ErrUnavailable) {
		testenv.Unavailable(t, "no server: "+err.Error(), "run .ci/install-versitygw.sh, or set "+s3test.EnvBinary)
	}
	if err != nil {
		t.Fatalf("Start: got %v, want nil", err)
	}
	client, closeIdle := srv.NewClient()
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(srv.Bucket)}); err != nil {
		t.Fatalf("HeadBucket(%s): got %v, want nil", srv.Bucket, err)
	}
	closeIdle()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	if srv.Endpoint == "" {
		return // an existing endpoint keeps running
	}
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Fatalf("after Close, dialing %s: got a connection, want refused", u.Host)
	}
}

func TestNewPerTest(t *testing.T) {
	srv := s3test.New(t)
	client := srv.Client(t)
	v := srv.VersionedBucket(t)
	out, err := client.GetBucketVersioning(t.Context(), &s3.GetBucketVersioningInput{Bucket: aws.String(v)})
	if err != nil || out.Status != "Enabled" {
		t.Fatalf("versioning of %s: got %q (%v), want Enabled", v, out.Status, err)
	}
}
