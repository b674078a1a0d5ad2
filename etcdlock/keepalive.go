package etcdlock

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// keepalive renews one lease on one long-lived LeaseKeepAlive stream, with
// one request outstanding at a time, so that the send time of each
// acknowledged request is known.
//
// clientv3 logs in (an Authenticate request: a read, a bcrypt check and a
// raft write on the server) before it opens each stream, so a stream per
// renewal (KeepAliveOnce) would cost a login per renewal. This stream is
// replaced only when a renewal fails or times out: a reply that may still
// come must never be taken for the next request's.
//
// It is used by the session's renewal goroutine alone.
type keepalive struct {
	cli    *clientv3.Client
	id     clientv3.LeaseID
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc // ends stream
}

// renew sends one keepalive and returns its send time and the TTL etcd
// granted. It gives up at deadline, and when ctx ends. A stream whose auth
// token etcd no longer accepts (a simple token unused for its TTL, an
// expired JWT) is replaced by a new one, logged in afresh, at once.
func (k *keepalive) renew(ctx context.Context, deadline time.Time) (instant, time.Duration, error) {
	sent, ttl, err := k.once(ctx, deadline)
	if tokenRefused(err) {
		sent, ttl, err = k.once(ctx, deadline)
	}
	return sent, ttl, err
}

func (k *keepalive) once(ctx context.Context, deadline time.Time) (instant, time.Duration, error) {
	if k.stream == nil {
		if err := k.open(ctx, deadline); err != nil {
			return 0, 0, err
		}
	}
	// The only way to bound a Recv is to end its stream.
	timer := time.AfterFunc(time.Until(deadline), k.cancel)
	defer func() {
		if !timer.Stop() {
			k.close()
		}
	}()
	sent := now()
	if err := k.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(k.id)}); err != nil {
		k.close()
		return 0, 0, rpctypes.Error(err)
	}
	resp, err := k.stream.Recv()
	if err != nil {
		k.close()
		return 0, 0, rpctypes.Error(err)
	}
	if resp.TTL <= 0 {
		return 0, 0, rpctypes.ErrLeaseNotFound
	}
	return sent, time.Duration(resp.TTL) * time.Second, nil
}

// open opens the stream, giving up at deadline: clientv3 logs in first,
// under the stream's context, so only ending that context bounds the login.
func (k *keepalive) open(ctx context.Context, deadline time.Time) error {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	timer := time.AfterFunc(time.Until(deadline), cancel)
	stream, err := pb.NewLeaseClient(k.cli.ActiveConnection()).LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	if !timer.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return rpctypes.Error(err)
	}
	k.stream, k.cancel = stream, cancel
	return nil
}

// close ends the stream, if any.
func (k *keepalive) close() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel = nil, nil
}

// tokenRefused reports whether etcd refused a request for its auth token,
// which a new login replaces.
func tokenRefused(err error) bool {
	return errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrAuthOldRevision)
}
