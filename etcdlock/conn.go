package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// connProbeTimeout bounds the probe connError makes.
const connProbeTimeout = 200 * time.Millisecond

// connError adds to err, a request's failure with its context's error, why
// cli cannot connect to etcd, if it cannot. clientv3 waits for a connection
// until the context ends and then reports the context's error alone, though
// gRPC knows the transport error (a TLS handshake refused for want of a
// client certificate, a connection refused); gRPC does not expose it, but
// fails a stream opened without waiting for a connection with it. The
// result still matches err.
func connError(cli *clientv3.Client, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	conn := cli.ActiveConnection()
	if conn == nil || conn.GetState() == connectivity.Ready {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), connProbeTimeout)
	defer cancel() // also ends the stream if the connection came back: nothing is sent on it
	_, perr := pb.NewLeaseClient(conn).LeaseKeepAlive(ctx)
	if status.Code(perr) != codes.Unavailable {
		return err
	}
	return &noConnectionError{err: err, why: status.Convert(perr).Message()}
}

// noConnectionError is a request's failure at a time when the Client had
// no connection to etcd, with gRPC's reason.
type noConnectionError struct {
	err error
	why string
}

func (e *noConnectionError) Error() string {
	return fmt.Sprintf("%v (no connection to etcd: %s)", e.err, e.why)
}
func (e *noConnectionError) Unwrap() error { return e.err }
