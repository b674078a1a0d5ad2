package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fencelock/fencelock/fence"
)

// Client is what a Store or a Table sends its requests through: a
// *dynamodb.Client is one.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// sendOnce turns the SDK's retries off for one call. The SDK resends a
// request whose reply was lost (a broken connection, a 5xx); a resent
// conditional write whose first copy landed would be refused by its own
// floor, or after a newer token's write, and say stale of a write that
// landed. Sent once, a lost reply is an unknown outcome instead, so a
// reply must not be lost to the client itself: sendOnce also hides the
// request body's WriteTo (see [hideWriteTo]).
func sendOnce(o *dynamodb.Options) {
	if !resendForTest.Load() {
		o.Retryer = aws.NopRetryer{}
	}
	if !keepWriteToForTest.Load() {
		o.APIOptions = append(slices.Clip(o.APIOptions), addHideWriteTo)
	}
}

// keepWriteToForTest leaves the body's WriteTo in place, for the control
// of TestLargeReplyNotLost (export_test.go).
var keepWriteToForTest atomic.Bool

// addHideWriteTo adds [hideWriteTo] at the end of a call's finalize step,
// after the body is signed and before it is sent.
func addHideWriteTo(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fencelock:HideWriteTo", hideWriteTo), middleware.After)
}

// hideWriteTo sends a request's body as a reader without WriteTo. The SDK
// closes the body as soon as the reply's headers arrive, and its body's
// WriteTo, called after that by net/http for the last, empty read of a
// body it has already sent in full, returns io.EOF as an error; net/http
// then takes the write as failed and closes the connection under the
// reply still being read. The call fails with "use of closed network
// connection" after the server answered (aws/aws-sdk-go-v2#2737). With
// the SDK's retries that costs a resend; sent once, it is an unknown
// outcome, the write's effect not knowable, and a reply of a few hundred
// KB (an Update's claim of a large item) met it about once in a hundred
// calls against a server on the same machine. Read alone returns io.EOF
// on a closed body as the end, which net/http takes as one.
func hideWriteTo(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if s, ok := req.GetStream().(io.ReadSeeker); ok {
			if _, ok := s.(io.WriterTo); ok {
				r, err := req.SetStream(readSeeker{s})
				if err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, err
				}
				in.Request = r
			}
		}
	}
	return next.HandleFinalize(ctx, in)
}

// readSeeker is an io.ReadSeeker and no more.
type readSeeker struct{ io.ReadSeeker }

// resendForTest keeps the SDK's retries, for the control of the test that
// shows why they are off (export_test.go).
var resendForTest atomic.Bool

// httpStatus returns the HTTP status of an error that carries the
// server's answer, and 0 for one that does not (no answer came).
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// writeError turns the error of a conditional write into the error to
// return: [ErrNoTable] for a table that does not exist; DynamoDB's error
// for any other answer of 4xx (a refusal: validation, throttling, a
// transaction conflict, access denied), where nothing was written; and a
// *[fence.UnknownOutcomeError] for everything else: no answer (a broken
// connection, a timeout, the context ending), a 5xx, or a
// TransactionInProgressException (a 4xx saying that another copy of this
// very transaction, with its client request token, is still running, and
// may commit), after which DynamoDB may have applied the write. This is
// the one place that rule is stated. The conditional check's failure is
// the caller's to read first.
func writeError(what, key string, token fence.Token, err error) error {
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s %q: %w", ErrNoTable, what, key, err)
	}
	var ip *types.TransactionInProgressException
	if s := httpStatus(err); s >= 400 && s < 500 && !errors.As(err, &ip) {
		return fmt.Errorf("dynamofence: %s %q: refused by DynamoDB, nothing written: %w", what, key, err)
	}
	return &fence.UnknownOutcomeError{Resource: key, Token: token, Err: err}
}

// txConflict reports whether err is DynamoDB's refusal of a request on an
// item that a transaction is writing at that moment
// (TransactionConflictException): nothing was written, and the item is
// about to change, so an Update or UpdateAll reads it again, as it does
// when its own transaction meets one.
func txConflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}
