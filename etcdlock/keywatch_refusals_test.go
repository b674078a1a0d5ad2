package etcdlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// refusing turns a share of the watch creations etcd confirms into
// refusals (permission denied), as etcd answers one it refuses: creations
// refused and accepted interleave on one stream.
type refusing struct {
	mu      sync.Mutex
	rng     *rand.Rand
	share   float64
	refused int
}

func (r *refusing) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !strings.HasSuffix(method, "Watch/Watch") {
		return cs, err
	}
	return &refusingStream{ClientStream: cs, r: r}, nil
}

type refusingStream struct {
	grpc.ClientStream
	r *refusing
}

func (s *refusingStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	wr, ok := m.(*pb.WatchResponse)
	if !ok || !wr.Created || wr.Canceled {
		return nil
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.r.rng.Float64() < s.r.share {
		s.r.refused++
		wr.WatchId, wr.Canceled, wr.CancelReason = -1, true, rpctypes.ErrGRPCPermissionDenied.Error()
	}
	return nil
}

// Creations refused and accepted interleaved on one stream: the answers
// are matched to the right watches, every refused lock reads its key and
// is watched again, every deleted key's lock learns it and no other lock
// is taken for lost.
func TestKeyWatchRefusalsInterleaved(t *testing.T) {
	testenv.Long(t, "it waits out interleaved refusals and their backoff")
	t.Parallel()
	const n = 1000
	r := &refusing{rng: rand.New(rand.NewPCG(308, 1)), share: 0.3}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(r.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c := newLocker(t, cli, etcdlock.WithTTL(3*time.Second))
	admin := etcdClient(t)
	locks := lockMany(t, c, "interleave", n)
	poll.Until(t, "the watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == n && ok })
	r.mu.Lock()
	r.share = 0
	t.Logf("%d creations refused", r.refused)
	r.mu.Unlock()
	// The refused watches live on in etcd (this fault refuses after the
	// fact) and deliver events the Client must ignore: every key deleted.
	for i, l := range locks {
		if i%3 != 0 {
			continue
		}
		if _, err := admin.Delete(t.Context(), l.Key()); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range locks {
		if i%3 != 0 {
			continue
		}
		waitClosed(t, l.Done(), 5*time.Second, "Done of "+l.Name())
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("%s: Err: got %v, want ErrKeyDeleted", l.Name(), err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for i, l := range locks {
		if i%3 != 0 {
			assertHeld(t, l)
		}
	}
}
