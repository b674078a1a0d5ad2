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

// MultipartClient is a [Client] that can also make multipart uploads;
// *s3.Client implements it. A [Store] whose client implements it writes
// objects larger than [WithMultipartThreshold] as fenced multipart uploads;
// with a plain Client such writes fail with an error matching
// [ErrInvalidArgument]. The Store turns the SDK's retries off for
// CompleteMultipartUpload, as for conditional PUTs.
type MultipartClient interface {
	Client
	CreateMultipartUpload(ctx context.Context, params *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, params *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, params *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, params *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

var _ MultipartClient = (*s3.Client)(nil)
