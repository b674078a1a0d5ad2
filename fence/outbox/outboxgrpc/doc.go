// Package outboxgrpc is the receiving side of an outbox for gRPC
// services, as outbox.NewReceiver is for HTTP ones: its [Interceptor]'s
// Unary deduplicates each call on its "idempotency-key" metadata entry
// and refuses a stale "fencing-token" (fence/propagate's value, parsed
// into the handler's context by fence/propagate/fencegrpc), through an
// [outbox.Receipts] kept in a fenced store:
//
//	r, err := outbox.NewReceipts(store) // a fenced store: fence/postgres, fence/etcd, ...
//	...
//	i, err := outboxgrpc.NewInterceptor(r)
//	...
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(i.Unary))
//
// A repeat gets the first response (its message, kept marshalled with its
// full name and rebuilt through protoregistry, or its error's status),
// and the handler does not run; a duplicate while the first is in
// progress gets Aborted with reason [ReasonInFlight] and a RetryInfo; a
// token below its lock name's floor gets fencegrpc's stale refusal
// (Aborted, reason fencegrpc.ReasonStale), kept as the answer. An error a
// caller retries (Unavailable, Internal, Unknown, DeadlineExceeded,
// ResourceExhausted, Canceled, DataLoss, Aborted other than stale) is not
// kept: the next call runs the handler again.
package outboxgrpc
