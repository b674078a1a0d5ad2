package fencegrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

// Option configures an [Interceptor].
type Option interface {
	apply(*options)
}

type options struct {
	required bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithRequired sets whether a call must carry a fencing token. Default
// true: a call without one is refused with FailedPrecondition before the
// handler runs. With false it reaches the handler, whose context then
// carries no Fencing and names no issuer (one an earlier interceptor put
// there is cleared); a token that is sent must still parse.
func WithRequired(required bool) Option {
	return optionFunc(func(o *options) { o.required = required })
}

// Interceptor is the server's side: its [Interceptor.Unary] and
// [Interceptor.Stream] parse each call's fencing-token metadata entry
// ([propagate.Parse]) into the handler's context, where the handler finds
// it with [propagate.FromContext]. A call whose entry does not parse, or
// that has more than one, is refused with InvalidArgument, and one without
// it (unless [WithRequired](false)) with FailedPrecondition, both before
// the handler runs; each refusal carries an ErrorInfo detail (domain
// [Domain], reason [ReasonInvalid] or [ReasonMissing]). A handler's error
// that matches [fence.ErrStale] and has no status of its own is sent as
// Aborted, with reason [ReasonStale] and the tokens ("name", "token",
// "current" when known) in the detail's metadata.
//
// An Interceptor is safe for concurrent use; create one with
// [NewInterceptor].
type Interceptor struct {
	o options
}

// NewInterceptor returns an Interceptor. It fails with an error matching
// [fence.ErrInvalidArgument] on a nil option.
func NewInterceptor(opts ...Option) (*Interceptor, error) {
	o := options{required: true}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: fencegrpc: nil Option", fence.ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	return &Interceptor{o: o}, nil
}

// ServerOptions returns the server options that add i's Unary and Stream
// to a server, after any interceptors added before them.
func (i *Interceptor) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(i.Unary), grpc.ChainStreamInterceptor(i.Stream)}
}

// Unary is a grpc.UnaryServerInterceptor (see [Interceptor]).
func (i *Interceptor) Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, f, err := i.incoming(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	return resp, serverError(err, f)
}

// Stream is a grpc.StreamServerInterceptor (see [Interceptor]).
func (i *Interceptor) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, f, err := i.incoming(ss.Context())
	if err != nil {
		return err
	}
	return serverError(handler(srv, &serverStream{ServerStream: ss, ctx: ctx}), f)
}

// incoming returns ctx with the call's Fencing (zero when it carries none
// and none is required), or the refusal.
func (i *Interceptor) incoming(ctx context.Context) (context.Context, propagate.Fencing, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get(MetadataKey)
	switch {
	case len(vs) == 0 && !i.o.required:
		// A call without a token names no issuer, whatever an earlier
		// interceptor put in its context.
		if fence.IssuerFromContext(ctx) != "" {
			ctx = fence.ContextWithIssuer(ctx, "")
		}
		return ctx, propagate.Fencing{}, nil
	case len(vs) == 0:
		return nil, propagate.Fencing{}, refusal(codes.FailedPrecondition, ReasonMissing,
			"fencegrpc: the call carries no fencing token (metadata "+MetadataKey+") and the service requires one", nil)
	case len(vs) > 1:
		return nil, propagate.Fencing{}, refusal(codes.InvalidArgument, ReasonInvalid,
			fmt.Sprintf("fencegrpc: %d %s metadata entries, want one", len(vs), MetadataKey), nil)
	}
	f, err := propagate.Parse(vs[0])
	if err != nil {
		return nil, propagate.Fencing{}, refusal(codes.InvalidArgument, ReasonInvalid, "fencegrpc: "+err.Error(), nil)
	}
	ctx, _ = propagate.NewContext(ctx, f)        // f parsed, so valid
	ctx = fence.ContextWithIssuer(ctx, f.Issuer) // none clears any
	return ctx, f, nil
}

type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
