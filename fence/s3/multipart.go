package s3fence

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fencelock/fencelock/fence"
)

// S3's limits on multipart uploads, and the defaults within them.
const (
	minPartSize     = 5 << 20  // every part but the last
	maxPutSize      = 5 << 30  // one PutObject, or one part
	maxParts        = 10000    // parts in one upload
	defaultPartSize = 64 << 20 // WithPartSize's default
	abortTimeout    = 10 * time.Second
)

// upload is a write's multipart upload. Its parts are sent on the write's
// first attempt, the envelope header in the first; each attempt then sends
// CompleteMultipartUpload with the attempt's condition. The parts carry the
// token and the write ID, not the condition, so a refused Complete is
// retried without sending them again, unless the server dropped the upload.
type upload struct {
	create   *s3.CreateMultipartUploadInput // the write's settings, without bucket and key
	partSize int64
	id       string // "" until created
	parts    []types.CompletedPart
}

// validateMultipart checks WithMultipartThreshold and WithPartSize.
func (o *options) validateMultipart() error {
	switch {
	case o.threshold < minPartSize || o.threshold > maxPutSize:
		return fmt.Errorf("%w: WithMultipartThreshold(%d): must be between %d (5 MiB) and %d (5 GiB)", ErrInvalidOption, o.threshold, minPartSize, maxPutSize)
	case o.partSize < minPartSize || o.partSize > maxPutSize:
		return fmt.Errorf("%w: WithPartSize(%d): must be between %d (5 MiB) and %d (5 GiB)", ErrInvalidOption, o.partSize, minPartSize, maxPutSize)
	}
	return nil
}

// planUpload makes w a multipart upload if its object is above the
// threshold.
func (s *Store) planUpload(w *write) error {
	if w.size() <= s.opts.threshold {
		return nil
	}
	create, err := createInput(w.in)
	if err != nil {
		return err
	}
	if _, ok := s.client.(MultipartClient); !ok {
		return fmt.Errorf("%w: an object of %d bytes needs a multipart upload, and the client (%T) does not implement MultipartClient",
			ErrInvalidArgument, w.size(), s.client)
	}
	w.mp = &upload{create: create, partSize: max(s.opts.partSize, (w.size()+maxParts-1)/maxParts)}
	return nil
}

// uploadParts creates w's upload and sends its parts, unless w has none or
// they are already there. Nothing is visible until the upload is completed.
func (s *Store) uploadParts(ctx context.Context, w *write) error {
	if w.mp == nil || w.mp.id != "" {
		return nil
	}
	mc := s.client.(MultipartClient)
	in := *w.mp.create
	in.Bucket, in.Key = &s.bucket, &w.key
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := mc.CreateMultipartUpload(ctx, &in)
	if err != nil {
		return s.failure("create multipart upload", w.key, err)
	}
	w.mp.id, w.mp.parts = aws.ToString(out.UploadId), nil
	for n, off := int32(1), int64(0); off < w.size(); n, off = n+1, off+w.mp.partSize {
		part, err := s.uploadPart(ctx, mc, w, n, off, min(w.mp.partSize, w.size()-off))
		if err != nil {
			return s.failure(fmt.Sprintf("upload part %d of", n), w.key, err)
		}
		w.mp.parts = append(w.mp.parts, part)
	}
	return nil
}

// uploadPart sends part n, the object's bytes [off, off+size). The SDK may
// retry it: sending a part again replaces it.
func (s *Store) uploadPart(ctx context.Context, mc MultipartClient, w *write, n int32, off, size int64) (types.CompletedPart, error) {
	body := w.body(off, size)
	defer body.retire()
	in := &s3.UploadPartInput{Bucket: &s.bucket, Key: &w.key, UploadId: &w.mp.id, PartNumber: aws.Int32(n),
		Body: body, ContentLength: aws.Int64(size), ChecksumAlgorithm: w.in.ChecksumAlgorithm,
		ExpectedBucketOwner: s.owner(), RequestPayer: w.in.RequestPayer}
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := mc.UploadPart(ctx, in)
	if err != nil {
		return types.CompletedPart{}, err
	}
	part := types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
	copyFields(&part, out) // the part's checksums, if any
	return part, nil
}

// completeUpload completes w's upload, valid only if the object is still v
// (or still absent). Its errors are classified as a PutObject's
// ([classifyPut]), except 404 NoSuchUpload, which [Store.uploadGone]
// decides.
func (s *Store) completeUpload(ctx context.Context, w *write, v version, exists bool) (etag string, err error) {
	in := &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &w.key, UploadId: &w.mp.id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.mp.parts}, ExpectedBucketOwner: s.owner(),
		RequestPayer: w.in.RequestPayer}
	in.IfMatch, in.IfNoneMatch = condition(v, exists)
	s.sseC(&in.SSECustomerAlgorithm, &in.SSECustomerKey, &in.SSECustomerKeyMD5)
	out, err := s.client.(MultipartClient).CompleteMultipartUpload(ctx, in, noRetries)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// uploadGone decides a Complete answered 404 NoSuchUpload. The upload was
// aborted (by someone else, or a lifecycle rule) or completed, by an
// earlier delivery of this same Complete whose answer was lost: the read
// back tells. If the object carries this write, it landed. If it carries a
// newer token, this write may have landed before it, or never: the outcome
// is unknown (not stale, which would say nothing changed). Otherwise the
// write did not land, and the parts are sent again in a new upload
// (refused: the loop reads and decides again).
func (s *Store) uploadGone(ctx context.Context, w *write, completeErr error) (refused bool, err error) {
	w.mp.id, w.mp.parts = "", nil // gone either way: nothing to abort, and a retry starts a new one
	s.cache.drop(w.key)
	v, exists, err := s.current(ctx, w.key)
	switch {
	case err != nil:
		return false, &fence.UnknownOutcomeError{Resource: w.key, Token: w.hdr.token, Err: completeErr}
	case exists && v.hdr.id == w.hdr.id:
		w.landed(s, v.etag)
		return false, nil
	case exists && v.hdr.token > w.hdr.token:
		return false, &fence.UnknownOutcomeError{Resource: w.key, Token: w.hdr.token,
			Err: fmt.Errorf("upload gone (completed or aborted) and token %d written since: %w", v.hdr.token, completeErr)}
	}
	return true, completeErr
}

// abortUpload aborts w's upload after a failed write, so that its parts are
// not kept (and billed) and, after an unknown outcome, so that a Complete
// still under way is less likely to land later. Its own failure is not
// reported: the write's error is what the caller needs, and a lifecycle
// rule (AbortIncompleteMultipartUpload) cleans up what is left. It runs
// even after ctx has ended, for at most abortTimeout.
func (s *Store) abortUpload(ctx context.Context, w *write) {
	if w.mp == nil || w.mp.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, _ = s.client.(MultipartClient).AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &s.bucket, Key: &w.key, UploadId: &w.mp.id, ExpectedBucketOwner: s.owner(), RequestPayer: w.in.RequestPayer})
}

// createInput carries a write's PutObject settings over to
// CreateMultipartUpload, field by field, and refuses a setting that has no
// counterpart there (it would be silently dropped).
func createInput(put *s3.PutObjectInput) (*s3.CreateMultipartUploadInput, error) {
	in := &s3.CreateMultipartUploadInput{}
	if left := copyFields(in, put); len(left) > 0 { // Body and ContentLength are unset: checkOwnedFields
		return nil, fmt.Errorf("%w: PutOption sets PutObjectInput.%s, which a multipart upload cannot carry", ErrInvalidOption, left[0])
	}
	return in, nil
}

// copyFields copies the fields of *src that *dst has too (same name and
// type) and returns the names of the non-zero fields of *src it could not
// copy.
func copyFields(dst, src any) (left []string) {
	d, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range sv.NumField() {
		f, name := sv.Field(i), sv.Type().Field(i).Name
		if !sv.Type().Field(i).IsExported() || f.IsZero() {
			continue
		}
		if df := d.FieldByName(name); df.IsValid() && df.Type() == f.Type() {
			df.Set(f)
		} else {
			left = append(left, name)
		}
	}
	return left
}
