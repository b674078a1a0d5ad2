package reqfault

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

func (in *Injector) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	in.mu.Lock()
	refuse := in.refuse != nil && in.refuse(method, nil)
	in.calls[method]++
	in.mu.Unlock()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return cs, err
	}
	return &faultyStream{ClientStream: cs, in: in, method: method, ctx: ctx, refuse: refuse}, nil
}

// faultyStream counts the messages sent, hangs while HangStreams matches
// its method (a message received meanwhile is dropped, and none follows
// until the stream's context ends), and turns the server's confirmation of
// each new watch into a cancellation if RefuseWatches matched it when it
// was opened.
type faultyStream struct {
	grpc.ClientStream
	in     *Injector
	method string
	ctx    context.Context
	refuse bool
	hung   bool
}

func (s *faultyStream) SendMsg(m any) error {
	s.in.mu.Lock()
	s.in.sent[s.method]++
	s.in.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

// hanging reports whether the stream must hang, counting it once.
func (s *faultyStream) hanging() bool {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	if s.in.hang == nil || !s.in.hang(s.method, nil) {
		return s.hung
	}
	if !s.hung {
		s.hung = true
		s.in.hung++
	}
	return true
}

func (s *faultyStream) RecvMsg(m any) error {
	if s.hanging() {
		<-s.ctx.Done()
		return s.ctx.Err()
	}
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	if s.hanging() {
		<-s.ctx.Done()
		return s.ctx.Err()
	}
	if !s.refuse {
		return nil
	}
	if wr, ok := m.(*pb.WatchResponse); ok && wr.Created {
		// What etcd sends for a watch it refuses. The server's watch stays
		// registered; the client ignores its events.
		wr.WatchId, wr.Canceled = -1, true
		wr.CancelReason = "reqfault: watch refused"
	}
	return nil
}
