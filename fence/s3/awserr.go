package s3fence

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/smithy-go"
)

// putResult is what a PutObject error says about the write.
type putResult int

const (
	// putRefused: the condition did not hold (412 PreconditionFailed, 409
	// ConditionalRequestConflict, or 404 for If-Match after a delete).
	// Nothing was written; read again and decide.
	putRefused putResult = iota + 1
	// putUnknown: no answer, or a 5xx other than 501. The PUT may have
	// landed: a 500, 502, 503 (SlowDown included) or 504 may come from a
	// proxy or front end after the write reached the storage layer.
	putUnknown
	// putFailed: the server answered with another error (501
	// NotImplemented included: it did not carry out the request), the
	// request never left (a refused dial), or reading the caller's value
	// failed, which cuts the request short of its Content-Length. Nothing
	// was written.
	putFailed
)

// classifyPut is the one rule for what a PutObject error says about the write.
func classifyPut(err error) putResult {
	switch status := httpStatus(err); {
	case errors.Is(err, errValueRead):
		return putFailed
	case status == http.StatusPreconditionFailed, status == http.StatusConflict:
		return putRefused
	case status == http.StatusNotFound && apiCode(err) != "NoSuchBucket":
		return putRefused
	case status == http.StatusNotImplemented:
		return putFailed
	case status >= 500:
		return putUnknown
	case status != 0:
		return putFailed
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return putFailed
	}
	return putUnknown
}

// httpStatus returns the status code of the response behind err, or 0 when
// no response arrived.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// apiCode returns the S3 error code behind err ("NoSuchKey", …), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports whether err says the key does not exist.
func isNotFound(err error) bool {
	code := apiCode(err)
	return code == "NoSuchKey" || code == "NotFound" ||
		(httpStatus(err) == http.StatusNotFound && code != "NoSuchBucket")
}

// putFailure is failure for a PUT: a 501 says the server does not implement
// the conditional write.
func (s *Store) putFailure(key string, err error) error {
	if httpStatus(err) == http.StatusNotImplemented {
		return fmt.Errorf("s3fence: put s3://%s/%s: %w: %w", s.bucket, key, ErrConditionalUnsupported, err)
	}
	return s.failure("put", key, err)
}

// failure wraps an error from S3 with what was being done, and with
// ErrNoSuchBucket or ErrAccessDenied when it is one of those. A missing
// bucket leads with the bucket's name: the key (often the probe's, on a
// Store's first write) is not what is wrong.
func (s *Store) failure(op, key string, err error) error {
	switch {
	case apiCode(err) == "NoSuchBucket":
		return fmt.Errorf("%w %q (%s s3://%s/%s): %w", ErrNoSuchBucket, s.bucket, op, s.bucket, key, err)
	case httpStatus(err) == http.StatusForbidden:
		return fmt.Errorf("s3fence: %s s3://%s/%s: %w: %w", op, s.bucket, key, ErrAccessDenied, err)
	}
	return fmt.Errorf("s3fence: %s s3://%s/%s: %w", op, s.bucket, key, err)
}
