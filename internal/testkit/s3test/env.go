package s3test

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// FromEnv describes the existing endpoint named by the environment, if
// FENCELOCK_S3_BUCKET is set (ok reports whether it is). The bucket must
// exist; tests write under unique keys and do not delete them.
// FENCELOCK_S3_ENDPOINT empty means AWS S3 in FENCELOCK_S3_REGION (default
// us-east-1). Without FENCELOCK_S3_ACCESS_KEY and FENCELOCK_S3_SECRET_KEY the
// AWS SDK's default credential chain (AWS_* variables, ~/.aws) is used.
// FromEnv checks that the bucket can be reached within ctx.
func FromEnv(ctx context.Context) (s *Server, ok bool, err error) {
	bucket := os.Getenv(EnvBucket)
	if bucket == "" {
		return nil, false, nil
	}
	s = &Server{Config: Config{
		Endpoint:  os.Getenv(EnvEndpoint),
		Region:    os.Getenv(EnvRegion),
		AccessKey: os.Getenv(EnvAccessKey),
		SecretKey: os.Getenv(EnvSecretKey),
		Bucket:    bucket,
	}}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	client, closeIdle := s.NewClient()
	defer closeIdle()
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, true, fmt.Errorf("s3test: %s=%s at %q: %w", EnvBucket, bucket, s.Endpoint, err)
	}
	return s, true, nil
}
