package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// EnsureVersionedBucket makes sure cfg.Bucket exists with versioning
// enabled, creating it and enabling versioning when it can. The harness
// reads object versions as the S3 server's record of accepted writes.
func EnsureVersionedBucket(ctx context.Context, cfg s3test.Config) error {
	c, closeIdle := cfg.NewClient()
	defer closeIdle()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		if _, herr := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(cfg.Bucket)}); herr != nil {
			return fmt.Errorf("harness: bucket %s: %w", cfg.Bucket, err)
		}
	}
	_, err = c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(cfg.Bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		return fmt.Errorf("harness: enabling versioning on %s: %w", cfg.Bucket, err)
	}
	return nil
}
