package outboxgrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/fence/propagate/fencegrpc"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// MetadataKey is the gRPC metadata key the idempotency key travels under.
const MetadataKey = "idempotency-key"

// The reasons of the ErrorInfo details (domain fencegrpc.Domain) this
// package's refusals carry.
const (
	ReasonInFlight   = "IDEMPOTENCY_KEY_IN_FLIGHT"
	ReasonMissingKey = "IDEMPOTENCY_KEY_MISSING"
	ReasonInvalidKey = "IDEMPOTENCY_KEY_INVALID"
)

// settleTimeout bounds recording an answer after the handler ran, when
// the call's own context may have ended.
const settleTimeout = 10 * time.Second

// Interceptor is the server's side (see the package's documentation). It
// is safe for concurrent use; create one with [NewInterceptor].
type Interceptor struct {
	r  *outbox.Receipts
	fi *fencegrpc.Interceptor
}

// NewInterceptor returns an Interceptor deduplicating through r, whose
// options (outbox.WithKeyRequired, outbox.WithTokenRequired, ...) it
// follows. It fails with an error matching [fence.ErrInvalidArgument] for
// a nil r.
func NewInterceptor(r *outbox.Receipts) (*Interceptor, error) {
	if nilcheck.IsNil(r) {
		return nil, fmt.Errorf("%w: outboxgrpc: NewInterceptor: nil Receipts", fence.ErrInvalidArgument)
	}
	fi, err := fencegrpc.NewInterceptor(fencegrpc.WithRequired(r.TokenRequired()))
	if err != nil {
		return nil, err
	}
	return &Interceptor{r: r, fi: fi}, nil
}

// Unary is a grpc.UnaryServerInterceptor (see [Interceptor]). It parses
// the fencing token itself (as fencegrpc's Interceptor does): do not
// chain both.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	keys := md.Get(MetadataKey)
	switch {
	case len(keys) == 0 && i.r.KeyRequired():
		return nil, refusal(codes.FailedPrecondition, ReasonMissingKey, "outboxgrpc: the call carries no "+MetadataKey+" metadata entry and the service requires one")
	case len(keys) > 1:
		return nil, refusal(codes.InvalidArgument, ReasonInvalidKey, fmt.Sprintf("outboxgrpc: %d %s metadata entries, want one", len(keys), MetadataKey))
	}
	return i.fi.Unary(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		f, _ := propagate.FromContext(ctx)
		if len(keys) == 0 {
			if err := i.r.Floor(ctx, f); err != nil {
				return nil, err // stale: fencegrpc's refusal
			}
			return handler(ctx, req)
		}
		return i.deliver(ctx, keys[0], f, req, handler)
	})
}

// deliver handles a keyed call through the receipts.
func (i *Interceptor) deliver(ctx context.Context, key string, f propagate.Fencing, req any, handler grpc.UnaryHandler) (any, error) {
	d, err := i.r.Begin(ctx, key, f)
	switch {
	case errors.Is(err, outbox.ErrInFlight):
		return nil, inFlight(err)
	case errors.Is(err, fence.ErrInvalidArgument):
		return nil, refusal(codes.InvalidArgument, ReasonInvalidKey, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	case d.Replay != nil:
		return replay(d.Replay, f)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if d.Stale != nil {
		_ = d.Finish(sctx, staleAnswer(d.Stale))
		return nil, d.Stale
	}
	done := false
	defer func() {
		if !done {
			_ = d.Release(sctx) // the handler panicked
		}
	}()
	// The handler applies the effect under a context the caller cannot
	// end, as outbox.NewReceiver's does: a caller that gave up would
	// otherwise leave its write landed, its answer an error, the key
	// released and the effect applied again.
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), i.r.PendingTimeout())
	defer hcancel()
	resp, err := handler(hctx, req)
	done = true
	if a, ok := answer(resp, err); ok {
		_ = d.Finish(sctx, a) // on failure the key stays pending until WithPendingTimeout
	} else {
		_ = d.Release(sctx)
	}
	return resp, err
}

// refusal returns a status with an ErrorInfo detail of reason.
func refusal(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: fencegrpc.Domain}); err == nil {
		st = d
	}
	return st.Err()
}

// inFlight is the refusal of a duplicate in flight: Aborted (a
// concurrency conflict, to retry) with a RetryInfo of one second.
func inFlight(err error) error {
	st := status.New(codes.Aborted, err.Error())
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonInFlight, Domain: fencegrpc.Domain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)},
	); err == nil {
		st = d
	}
	return st.Err()
}
