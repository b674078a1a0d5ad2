package s3fence

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Client is the part of an S3 client that a [Store] uses; *s3.Client from
// github.com/aws/aws-sdk-go-v2/service/s3 implements it. A Store passes
// per-call options to PutObject (it turns the SDK's own retries off for
// conditional PUTs) and expects them to be honoured.
type Client interface {
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ Client = (*s3.Client)(nil)
