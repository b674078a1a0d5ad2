package fencegrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/fencelock/fencelock/fence/propagate"
)

// DialOptions returns the dial options that add [UnaryClientInterceptor]
// and [StreamClientInterceptor] to a client connection, after any
// interceptors added before them.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor),
	}
}

// UnaryClientInterceptor sends the [propagate.Fencing] of the call's
// context ([propagate.FromContext]) in the fencing-token metadata entry,
// replacing any other, and turns the service's refusal of the call for its
// token into an error that matches it (see the package documentation). A
// call whose context carries no Fencing is sent as it is.
func UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	f, ctx := outgoing(ctx)
	return clientError(invoker(ctx, method, req, reply, cc, opts...), f)
}

// StreamClientInterceptor is [UnaryClientInterceptor] for streams: the
// Fencing goes with the stream's metadata, and the errors of opening the
// stream and of its RecvMsg are turned as UnaryClientInterceptor's are.
func StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	f, ctx := outgoing(ctx)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, clientError(err, f)
	}
	return &clientStream{ClientStream: cs, f: f}, nil
}

// outgoing returns the Fencing of ctx (zero: none) and ctx with it in its
// outgoing metadata.
func outgoing(ctx context.Context) (propagate.Fencing, context.Context) {
	f, ok := propagate.FromContext(ctx)
	if !ok {
		return f, ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(MetadataKey, f.String())
	return f, metadata.NewOutgoingContext(ctx, md)
}

type clientStream struct {
	grpc.ClientStream
	f propagate.Fencing
}

func (s *clientStream) RecvMsg(m any) error { return clientError(s.ClientStream.RecvMsg(m), s.f) }
