package s3fence

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// CheckMultipartConditionalWrites checks that the server honours If-Match
// and If-None-Match on CompleteMultipartUpload, as
// [Store.CheckConditionalWrites] does for PutObject (a server may honour
// one and not the other): on the probe object it completes two one-part
// uploads whose conditions cannot hold, and aborts them. A server that
// completes either, or answers 501, makes it return an error matching
// [ErrConditionalUnsupported], and the Store then refuses every multipart
// write with that error; writes of objects up to [WithMultipartThreshold]
// go on. Other errors say nothing about the server and are returned as they
// are. The client must implement [MultipartClient] ([ErrInvalidArgument]
// otherwise).
//
// A Store runs the check by itself before its first multipart write, unless
// [WithConditionalCheck](false) turned checks off. ctx bounds the check; it
// is safe for concurrent use.
func (s *Store) CheckMultipartConditionalWrites(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := s.mpCheck.acquire(ctx); err != nil {
		return err
	}
	defer s.mpCheck.release()
	return s.mpCheck.run(ctx, s.probeMultipart)
}

// probeMultipart makes sure the probe object exists, then completes an
// upload on it under each of the probe's conditions.
func (s *Store) probeMultipart(ctx context.Context) error {
	mc, ok := s.client.(MultipartClient)
	if !ok {
		return fmt.Errorf("%w: the client (%T) does not implement MultipartClient", ErrInvalidArgument, s.client)
	}
	if err := s.probePut(ctx, nil, aws.String("*")); err != nil && classifyPut(err) != putRefused {
		return s.probeFailure(err)
	}
	for _, st := range probeSteps {
		err := s.probeComplete(ctx, mc, st.ifMatch, st.ifNoneMatch)
		switch {
		case err == nil:
			return s.ignored("a CompleteMultipartUpload", st.what)
		case classifyPut(err) != putRefused || apiCode(err) == "NoSuchUpload":
			return s.probeFailure(err)
		}
	}
	return nil
}

// probeComplete uploads the probe body as a one-part upload, completes it
// under the given conditions, and aborts it if it is still open.
func (s *Store) probeComplete(ctx context.Context, mc MultipartClient, ifMatch, ifNoneMatch *string) error {
	key := &s.opts.probeKey
	out, err := mc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: key, ExpectedBucketOwner: s.owner()})
	if err != nil {
		return err
	}
	id := out.UploadId
	defer func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		_, _ = mc.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: key, UploadId: id, ExpectedBucketOwner: s.owner()})
	}()
	part, err := mc.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: key, UploadId: id, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(probeBody), ContentLength: aws.Int64(int64(len(probeBody))), ExpectedBucketOwner: s.owner()})
	if err != nil {
		return err
	}
	done := types.CompletedPart{PartNumber: aws.Int32(1), ETag: part.ETag}
	copyFields(&done, part)
	_, err = mc.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: key, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done}}, IfMatch: ifMatch, IfNoneMatch: ifNoneMatch,
		ExpectedBucketOwner: s.owner()}, noRetries)
	return err
}
