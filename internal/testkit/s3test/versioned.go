package s3test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// versionedBucketName is the versioned bucket a started server gets on demand.
const versionedBucketName = "fencelock-test-versioned"

type versionedBucket struct {
	once sync.Once
	name string
	err  error
}

// VersionedBucket returns a bucket with versioning enabled, whose object
// versions are the server's own record of every write it accepted. A started
// server creates it on first use. For an existing endpoint, FENCELOCK_S3_BUCKET
// is used if versioning is enabled on it; otherwise the test is skipped,
// or fails under CI=true.
func (s *Server) VersionedBucket(tb testing.TB) string {
	tb.Helper()
	s.versioned.once.Do(func() { s.versioned.name, s.versioned.err = s.setUpVersioned() })
	if s.versioned.err != nil {
		if s.proc != nil {
			tb.Fatalf("s3test: %v", s.versioned.err)
		}
		testenv.Unavailable(tb, "s3test: "+s.versioned.err.Error(),
			"enable versioning on "+EnvBucket+", or unset the FENCELOCK_S3_* variables to use versitygw")
	}
	return s.versioned.name
}

func (s *Server) setUpVersioned() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, closeIdle := s.NewClient()
	defer closeIdle()
	if s.proc == nil {
		out, err := client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.Bucket)})
		if err != nil {
			return "", fmt.Errorf("versioning of %s: %w", s.Bucket, err)
		}
		if out.Status != types.BucketVersioningStatusEnabled {
			return "", fmt.Errorf("bucket %s has no versioning enabled; this test reads the server's version history", s.Bucket)
		}
		return s.Bucket, nil
	}
	if err := s.createBucket(ctx, client, versionedBucketName); err != nil {
		return "", err
	}
	_, err := client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(versionedBucketName),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		return "", fmt.Errorf("enabling versioning: %w", err)
	}
	return versionedBucketName, nil
}
