package etcdlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// TestPartitionWriteContextSurvivesMove holds a partition's commit in
// flight (its request to a fenced store, fence/etcd, held in the client)
// while a worker joins and the partition is asked to move, then lets it
// go. Sent with the partition's WriteContext, it completes and the fence
// accepts it: the partition is still ours until it is released. The
// control sends it with the work's context, as docs/groups.md's consume
// did: the move cancels it in flight, and its outcome is unknown although
// the fence would have taken it.
func TestPartitionWriteContextSurvivesMove(t *testing.T) {
	for _, tc := range []struct {
		name         string
		writeContext bool
	}{
		{"write_context", true},
		{"control_work_context", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			direct := etcdClient(t)
			fcli, in := faulty(t, 51)
			offsets, err := etcdfence.New(fcli, prefix(t)+"offsets/")
			if err != nil {
				t.Fatal(err)
			}
			// Each commit waits, in flight, until a partition was asked to
			// move (its work's context ended with ErrMoved).
			moved := make(chan struct{})
			var moveOnce sync.Once
			var held atomic.Int64
			in.BeforeContext(puts(offsets.DataKey("p/0"), offsets.DataKey("p/1")), func(ctx context.Context, req any) {
				held.Add(1)
				select {
				case <-moved:
				case <-time.After(10 * time.Second):
				}
			})
			type commit struct {
				token fence.Token
				err   error
			}
			commits := make(chan commit, 2) // of the partition that moved
			work := func(ctx context.Context, p *etcdlock.Partition) error {
				stop := context.AfterFunc(ctx, func() {
					if errors.Is(context.Cause(ctx), etcdlock.ErrMoved) {
						moveOnce.Do(func() { close(moved) })
					}
				})
				defer stop()
				guard, err := fence.NewGuard(p)
				if err != nil {
					return err
				}
				wctx := ctx
				if tc.writeContext {
					wctx = p.WriteContext()
				}
				err = guard.Update(wctx, offsets, "p/"+strconv.Itoa(p.Index()), func(old fence.Record) ([]byte, error) {
					return []byte("10"), nil
				})
				if errors.Is(context.Cause(ctx), etcdlock.ErrMoved) {
					commits <- commit{p.Token(), err}
				}
				<-ctx.Done()
				return nil
			}
			joinGroup(t, group(t, newLocker(t, direct), "g", 2), work)
			poll.Until(t, "both partitions' commits in flight", func() bool { return held.Load() == 2 })
			idle := func(ctx context.Context, p *etcdlock.Partition) error { <-ctx.Done(); return nil }
			joinGroup(t, group(t, newLocker(t, direct), "g", 2), idle) // one of the two partitions moves to it
			var c commit
			select {
			case c = <-commits:
			case <-time.After(10 * time.Second):
				t.Fatal("no commit of a partition asked to move returned")
			}
			if !tc.writeContext {
				if !errors.Is(c.err, fence.ErrUnknownOutcome) {
					t.Fatalf("the commit sent with the work's context: got %v, want fence.ErrUnknownOutcome", c.err)
				}
				t.Logf("the control's commit, cancelled by the move: %v", c.err)
				return
			}
			if c.err != nil {
				t.Fatalf("the commit sent with WriteContext while the partition was asked to move: got %v, want nil", c.err)
			}
			for _, k := range []string{"p/0", "p/1"} { // the one that moved holds our commit, with our token
				rec, err := offsets.Get(t.Context(), k)
				if err == nil && rec.Token == c.token && string(rec.Value) == "10" {
					return
				}
			}
			t.Errorf("the commit with token %d was acknowledged, and is not in the store", c.token)
		})
	}
}
