package reqfault

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

func (in *Injector) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	in.mu.Lock()
	hang := in.hang != nil && in.hang(method, nil)
	refuse := in.refuse != nil && in.refuse(method, nil)
	in.calls[method]++
	if hang {
		in.hung++
	}
	in.mu.Unlock()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || (!hang && !refuse) {
		return cs, err
	}
	return &faultyStream{ClientStream: cs, ctx: ctx, hang: hang, refuse: refuse}, nil
}

// faultyStream hangs (no message is ever received) or turns the server's
// confirmation of each new watch into a cancellation.
type faultyStream struct {
	grpc.ClientStream
	ctx          context.Context
	hang, refuse bool
}

func (s *faultyStream) RecvMsg(m any) error {
	if s.hang {
		<-s.ctx.Done()
		return s.ctx.Err()
	}
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	if wr, ok := m.(*pb.WatchResponse); ok && wr.Created {
		// What etcd sends for a watch it refuses. The server's watch stays
		// registered; the client ignores its events.
		wr.WatchId, wr.Canceled = -1, true
		wr.CancelReason = "reqfault: watch refused"
	}
	return nil
}
