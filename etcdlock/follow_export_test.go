package etcdlock

import (
	"context"
	"maps"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// FollowStep is one step of the follower of FollowForTest: a read (Read,
// and Keys as read), a batch of events applied (Keys after it), a round
// that ended (Err, why), or a watch in place again after one ended
// (Resumed).
type FollowStep struct {
	Read    bool
	Keys    map[string]string // key → value
	Err     error
	Resumed bool
}

// FollowForTest follows the keys under the prefix read with the Client's
// follower (follow.go), watching those under the prefix watched (the
// same, but for a test of a watch refused while the read works), and
// sends each step on the returned channel, closed once the follower's
// goroutine has ended: when ctx ends or the Client is closed. between, if
// not nil, is called after each read, before its watch is added, with the
// round's number (from 0) and the read's revision.
func FollowForTest(ctx context.Context, c *Client, read, watched string, between func(round int, rev int64)) <-chan FollowStep {
	steps := make(chan FollowStep)
	var (
		fctx  context.Context // the follower's, for resumed
		keys  map[string]*mvccpb.KeyValue
		rev   int64
		round int
	)
	send := func(ctx context.Context, s FollowStep) error {
		select {
		case steps <- s:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &follower{c: c, key: watched, end: clientv3.GetPrefixRangeEnd(watched),
		read: func(ctx context.Context) (int64, error) {
			k, r, err := c.readRange(ctx, read)
			if err != nil {
				return 0, err
			}
			keys, rev = k, r
			if between != nil {
				between(round, r)
			}
			round++
			return r, send(ctx, FollowStep{Read: true, Keys: valuesOf(keys)})
		},
		apply: func(ctx context.Context, evs []*mvccpb.Event) error {
			for _, ev := range evs {
				applyEvent(keys, rev, ev)
			}
			return send(ctx, FollowStep{Keys: valuesOf(keys)})
		},
		ended: func(ctx context.Context, err error) error {
			send(ctx, FollowStep{Err: err})
			return nil
		},
		resumed: func() { send(fctx, FollowStep{Resumed: true}) },
	}
	follow := func(ctx context.Context) {
		fctx = ctx
		f.follow(ctx)
	}
	if !c.followInBackground(ctx, follow, func() { close(steps) }) {
		close(steps)
	}
	return steps
}

func valuesOf(keys map[string]*mvccpb.KeyValue) map[string]string {
	m := make(map[string]string, len(keys))
	for k, kv := range maps.All(keys) {
		m[k] = string(kv.Value)
	}
	return m
}
