package etcdfence

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
)

// refusedCodes are the gRPC codes of etcd's answers that refuse a request
// (bad request, no permission, no space or too many requests, an option
// the server does not have): given before the request is proposed, or by
// the apply of its raft entry on every member alike, so nothing of it was
// applied. Every other error (Unavailable, DeadlineExceeded, Canceled,
// etcd's "request timed out", Unknown, Internal, a context's error) may
// come after the entry was proposed, and leaves the outcome unknown.
var refusedCodes = map[codes.Code]bool{
	codes.InvalidArgument:    true,
	codes.FailedPrecondition: true,
	codes.OutOfRange:         true,
	codes.PermissionDenied:   true,
	codes.Unauthenticated:    true,
	codes.ResourceExhausted:  true,
	codes.Unimplemented:      true,
}

// writeError turns the error of a write's transaction into the error to
// return: [ErrValueTooLarge] for a request refused for its size, etcd's
// error for any other refusal, and a *[fence.UnknownOutcomeError] for an
// error that is no refusal. This is the one place that rule is stated.
func writeError(what, key string, token fence.Token, err error) error {
	c, ok := code(err)
	switch {
	case ok && tooLarge(c, err):
		return fmt.Errorf("%w: %s %q: %w", ErrValueTooLarge, what, key, err)
	case ok && refusedCodes[c]:
		return fmt.Errorf("etcdfence: %s %q: refused by etcd, nothing written: %w", what, key, err)
	}
	return &fence.UnknownOutcomeError{Resource: key, Token: token, Err: err}
}

// code returns the gRPC code of an error of etcd's client: an
// rpctypes.EtcdError (the client's form of etcd's own errors) or a gRPC
// status. A context's error, or anything else, has none.
func code(err error) (codes.Code, bool) {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code(), true
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK && s.Code() != codes.Unknown {
		return s.Code(), true
	}
	return codes.Unknown, false
}

// tooLarge reports whether err refused a request for its size: etcd's
// "request is too large", or gRPC's limit on a message's size, on the
// client's side or the server's.
func tooLarge(c codes.Code, err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	return c == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}
