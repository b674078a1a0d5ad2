// Package fencegrpc carries a lock's name and fencing token with gRPC
// calls, as package propagate does with HTTP ones: client interceptors
// send the [propagate.Fencing] of the call's context in the
// "fencing-token" metadata entry (the value is a Fencing-Token header's,
// see [propagate.Parse]), and the server's [Interceptor] parses it into
// the handler's context, refusing a call without one (FailedPrecondition)
// or with one that does not parse (InvalidArgument) before the handler
// runs, and turning a handler's error that matches [fence.ErrStale] into
// an Aborted status that the client interceptors turn back into an error
// matching fence.ErrStale.
//
//	conn, err := grpc.NewClient(addr, append(fencegrpc.DialOptions(), grpc.WithTransportCredentials(creds))...)
//	...
//	ctx, err := propagate.NewContext(ctx, propagate.FencingOf(lock.Name(), lock))
//	_, err = ledger.SetBalance(ctx, req)
//	if errors.Is(err, fence.ErrStale) {
//		// The service refused the write: a newer holder has written.
//	}
//
// and on the service's side:
//
//	fi, err := fencegrpc.NewInterceptor()
//	...
//	srv := grpc.NewServer(fi.ServerOptions()...)
//	// in a handler:
//	f, _ := propagate.FromContext(ctx)
//	_, err := postgres.Exec(ctx, pool, "invoice-42", f.Token, "UPDATE ...") // fenced on the resource
//	return nil, err // stale: Aborted, with the tokens in an ErrorInfo
//
// The errors the client interceptors return keep their status (status.Code
// and status.FromError work on them) and match [fence.ErrStale] (errors.As
// gives a [*fence.StaleError] with the request's name and token, and the
// resource's token when the service told it), [propagate.ErrMissing] or
// [propagate.ErrInvalidHeader].
//
// Why a package apart from propagate: a program imports what it links, and
// gRPC is large; an HTTP-only service that imports propagate does not
// compile or link it (gRPC is a requirement of this module anyway, for
// etcd's client).
package fencegrpc
