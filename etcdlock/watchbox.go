package etcdlock

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watchBox is the watchSink of the watches of an owner that is one
// goroutine (a waiter's, a follower's): it keeps what it is told until
// the owner, woken by note, takes it.
type watchBox struct {
	ws   []watch
	note chan struct{} // buffer 1: something was told since the last take

	mu   sync.Mutex // guards told
	told watchNews
}

// watchNews is what a watchBox was told since the last take.
type watchNews struct {
	created int             // watches now in place
	ended   bool            // a watch is over (see watchSink.watchEnded)
	deleted bool            // a deletion ended it
	reason  error           // etcd's reason, if it ended one with one
	events  []*mvccpb.Event // of a watch of every event, in order
}

// newWatchBox returns a box for watches of ws's keys or ranges, not yet
// added.
func newWatchBox(ws ...watch) *watchBox {
	b := &watchBox{ws: ws, note: make(chan struct{}, 1)}
	for i := range b.ws {
		b.ws[i].sink = b
	}
	return b
}

// add adds the box's watches to e, from revision rev (see watcher.add).
func (b *watchBox) add(ctx context.Context, e *watcher, rev int64) {
	for i := range b.ws {
		e.add(ctx, &b.ws[i], rev)
	}
}

// remove removes the box's watches from e.
func (b *watchBox) remove(e *watcher) {
	for i := range b.ws {
		e.remove(&b.ws[i])
	}
}

func (b *watchBox) tell(f func(*watchNews)) {
	b.mu.Lock()
	f(&b.told)
	b.mu.Unlock()
	select {
	case b.note <- struct{}{}:
	default:
	}
}

func (b *watchBox) watchCreated(int64) { b.tell(func(n *watchNews) { n.created++ }) }

func (b *watchBox) watchEvents(evs []*mvccpb.Event) {
	b.tell(func(n *watchNews) { n.events = append(n.events, evs...) })
}

func (b *watchBox) watchEnded(deleted bool, reason error) {
	b.tell(func(n *watchNews) {
		n.ended, n.deleted = true, n.deleted || deleted
		if reason != nil {
			n.reason = reason
		}
	})
}

// take returns what the box was told since the last take.
func (b *watchBox) take() watchNews {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.told
	b.told = watchNews{}
	return n
}
