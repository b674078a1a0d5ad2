package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestTryLockUnreachable: TryLock gives up at once only on etcd's answer.
// Against an etcd it cannot reach, it returns ctx's error when ctx ends,
// as its documentation says, and not before: bound it with a deadline.
func TestTryLockUnreachable(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second), etcdlock.WithCleanupTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close(context.Background())
	const bound = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	start := time.Now()
	_, err = locks.TryLock(ctx, "job")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryLock against an unreachable etcd: got %v, want an error matching context.DeadlineExceeded, not ErrLocked", err)
	}
	if took < bound || took > bound+2*time.Second {
		t.Fatalf("TryLock returned after %v, want when ctx ended (%v), within 2 s", took, bound)
	}
	t.Logf("TryLock returned after %v: %v", took, err)
}
