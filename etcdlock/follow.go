package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// follower is "read a range, watch it from the revision after the read,
// apply its events, start again", written once: Observe, a group's
// members and WatchStatus each give it a range and their steps.
//
// A round reads (read), watches [key, end) on the Client's stream (see
// watcher) from the revision after the read, and hands every batch of the
// watch's events to apply: each event after the read, none before, so a
// state that lasted one revision is seen too, and a revision's events come
// whole (etcd sends them in one response, and a take carries responses
// whole).
//
// The round ends when the watch does (etcd compacted the revision it
// starts from or refused it, or its stream failed, hung or never opened,
// which the watcher finds out), or when a step fails. The follower tells
// ended why, pauses (10 ms doubling to 1 s, 10 ms again after a round that
// lasted; 1 s at once after a missing permission, which may be granted
// meanwhile, but not within 10 ms), and starts a new round, whose read
// reads afresh: events a hung stream withheld, or compaction removed, are
// never waited for. Why a round ended stands until a watch is in place
// again (resumed): a read that works and a watch that is refused, round
// after round, must not pass for a follow that works.
type follower struct {
	// Set once before follow.
	c        *Client
	key, end string          // the range watched, [key, end)
	stop     <-chan struct{} // closed: follow's pause ends it (errStopped); nil never closes

	// The steps, called by follow's goroutine alone; read and apply are
	// required, nil leaves out the others.
	read    func(ctx context.Context) (rev int64, err error)      // reads afresh, as of rev
	apply   func(ctx context.Context, evs []*mvccpb.Event) error  // events after rev, in revision order
	await   func(ctx context.Context, note <-chan struct{}) error // waits for note (nil: awaitNote)
	ended   func(ctx context.Context, err error) (stop error)     // why a round ended; non-nil ends follow
	resumed func()                                                // a watch is in place after a round ended

	failing bool // a round ended, and no watch is in place since; follow's alone
}

// follow runs rounds until ctx ends (nil), stop closes during a pause
// (errStopped), or ended returns an error (that error).
func (f *follower) follow(ctx context.Context) error {
	backoff := watchBackoff()
	for {
		start := time.Now()
		err := f.round(ctx)
		f.failing = true
		if f.ended != nil {
			if err := f.ended(ctx, err); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if permanent(err) {
			backoff.d = backoff.max // a missing permission: keep trying (the role may be fixed), slowly
		}
		backoff.resetIfLasted(start)
		switch err := backoff.wait(ctx, f.stop); {
		case errors.Is(err, errStopped):
			return err
		case err != nil:
			return nil
		}
	}
}

// round reads, watches from the revision after the read and applies the
// watch's events until it ends, and returns why: etcd's reason, explained
// (a *PermissionError for a missing permission), or errWatchEnded.
func (f *follower) round(ctx context.Context) error {
	rev, err := f.read(ctx)
	if err != nil {
		return f.c.explain(err)
	}
	b := newWatchBox(watch{key: f.key, end: f.end, all: true})
	b.add(ctx, f.c.watches, rev+1)
	defer b.remove(f.c.watches)
	await := f.await
	if await == nil {
		await = awaitNote
	}
	for {
		if err := await(ctx, b.note); err != nil {
			return err
		}
		n := b.take()
		if n.created > 0 && f.failing {
			f.failing = false
			if f.resumed != nil {
				f.resumed()
			}
		}
		if len(n.events) > 0 {
			if err := f.apply(ctx, n.events); err != nil {
				return err
			}
		}
		if n.ended {
			if n.reason == nil {
				return errWatchEnded
			}
			return f.c.explain(n.reason)
		}
	}
}

// awaitNote waits for note, or for ctx to end (its error).
func awaitNote(ctx context.Context, note <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-note:
		return nil
	}
}

// errWatchEnded ends a watch that etcd or its stream ended without saying
// why.
var errWatchEnded = errors.New("etcdlock: watch ended")

// readRange reads the keys under prefix q, by key, and the revision of the
// read: what a watch of q then applies its events to (applyEvent).
func (c *Client) readRange(ctx context.Context, q string) (map[string]*mvccpb.KeyValue, int64, error) {
	resp, err := c.cli.Get(ctx, q, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	keys := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv
	}
	return keys, resp.Header.Revision, nil
}

// applyEvent updates keys, a range read at revision rev, with ev, an event
// of a watch of that range, unless the read already reflects it.
func applyEvent(keys map[string]*mvccpb.KeyValue, rev int64, ev *mvccpb.Event) {
	if ev.Kv.ModRevision <= rev {
		return
	}
	if ev.Type == mvccpb.DELETE {
		delete(keys, string(ev.Kv.Key))
	} else {
		keys[string(ev.Kv.Key)] = ev.Kv
	}
}

// followInBackground runs follow in the Client's background until ctx
// ends or the Client is closed, whichever comes first, then runs done
// (closing the caller's channel). It reports false, having run nothing,
// when the Client is closed.
func (c *Client) followInBackground(ctx context.Context, follow func(context.Context), done func()) bool {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	started := c.background(func() {
		defer done()
		defer cancel()
		defer stop()
		follow(ctx)
	})
	if !started {
		stop()
		cancel()
	}
	return started
}
