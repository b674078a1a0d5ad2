package etcdlock_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// record is etcd's own record of a test prefix: every event under it,
// watched from before the first request, with the key's previous value.
// For each deletion of a queue key that is not its owner's release (the
// release writes the lane's marker with the key's create revision in the
// same transaction), it asks etcd at once whether the key's lease is still
// alive: if it is, the key was taken from a live session.
type record struct {
	direct *clientv3.Client
	prefix string
	done   chan struct{}

	mu      sync.Mutex
	lives   map[int64]*life // create revision -> the key's life
	foreign []int64         // create revisions of keys deleted, not by their release, while their lease lived
	last    int64           // last revision seen
	err     error
}

// life is one queue key from creation to deletion.
type life struct {
	key           string
	queue         string
	create, del   int64
	lease         int64
	released, cut bool // deleted by its release / by someone else, lease alive
}

func watchRecord(ctx context.Context, direct *clientv3.Client, prefix string) (*record, error) {
	resp, err := direct.Get(ctx, prefix+"start")
	if err != nil {
		return nil, err
	}
	r := &record{direct: direct, prefix: prefix, done: make(chan struct{}), lives: map[int64]*life{}}
	wch := direct.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(resp.Header.Revision+1))
	go r.run(ctx, wch)
	return r, nil
}

func (r *record) run(ctx context.Context, wch clientv3.WatchChan) {
	defer close(r.done)
	for wr := range wch {
		if err := wr.Err(); err != nil {
			r.fail(err)
			return
		}
		byRev := map[int64][]*clientv3.Event{}
		var revs []int64
		for _, ev := range wr.Events {
			if byRev[ev.Kv.ModRevision] == nil {
				revs = append(revs, ev.Kv.ModRevision)
			}
			byRev[ev.Kv.ModRevision] = append(byRev[ev.Kv.ModRevision], ev)
		}
		for _, rev := range revs {
			r.apply(ctx, rev, byRev[rev])
		}
		r.mu.Lock()
		r.last = wr.Header.Revision
		r.mu.Unlock()
	}
}

// apply takes the events of one revision (one transaction).
func (r *record) apply(ctx context.Context, rev int64, evs []*clientv3.Event) {
	markers := map[string]bool{} // values written to markers in this revision
	for _, ev := range evs {
		if ev.Type == mvccpb.PUT && strings.HasPrefix(string(ev.Kv.Key), etcdlock.KeysUnder(r.prefix).Markers()) {
			markers[string(ev.Kv.Value)] = true
		}
	}
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		if !strings.HasPrefix(key, etcdlock.KeysUnder(r.prefix).Locks()) {
			continue
		}
		switch {
		case ev.Type == mvccpb.PUT && ev.Kv.Version == 1:
			r.mu.Lock()
			r.lives[ev.Kv.CreateRevision] = &life{key: key, queue: key[:strings.LastIndex(key, "/")+1],
				create: ev.Kv.CreateRevision, lease: ev.Kv.Lease}
			r.mu.Unlock()
		case ev.Type == mvccpb.DELETE && ev.PrevKv != nil:
			r.deleted(ctx, rev, ev.PrevKv, markers[strconv.FormatInt(ev.PrevKv.CreateRevision, 10)])
		}
	}
}

func (r *record) deleted(ctx context.Context, rev int64, prev *mvccpb.KeyValue, released bool) {
	cut := false
	if !released {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.direct.TimeToLive(tctx, clientv3.LeaseID(prev.Lease))
		cancel()
		cut = err == nil && resp.TTL >= 0 // the lease outlived the deletion
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lives[prev.CreateRevision]
	if l == nil {
		r.err = fmt.Errorf("deletion at %d of %s created at %d, whose creation was not seen", rev, prev.Key, prev.CreateRevision)
		return
	}
	l.del, l.released, l.cut = rev, released, cut
	if cut {
		r.foreign = append(r.foreign, l.create)
	}
}

func (r *record) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// catchUp waits until the record has seen revision rev.
func (r *record) catchUp(ctx context.Context, rev int64) error {
	for {
		r.mu.Lock()
		last, err := r.last, r.err
		r.mu.Unlock()
		if err != nil || last >= rev {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("record stuck at revision %d, want %d: %w", last, rev, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// check compares etcd's record with the acquisitions Lock returned:
// each was its queue's head with its own key alive, and none was taken from
// a live session by someone other than its owner.
func (r *record) check(granted map[int64]*etcdlock.Lock) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	byQueue := map[string][]*life{}
	for _, l := range r.lives {
		byQueue[l.queue] = append(byQueue[l.queue], l)
	}
	for _, q := range byQueue {
		slices.SortFunc(q, func(a, b *life) int { return int(a.create - b.create) })
	}
	for tok := range granted {
		l := r.lives[tok]
		if l == nil {
			bad = append(bad, fmt.Sprintf("token %d: Lock returned it, etcd never created it", tok))
			continue
		}
		head := r.headAt(byQueue[l.queue], l)
		switch {
		case head < 0:
			bad = append(bad, fmt.Sprintf("token %d: granted while a predecessor still exists", tok))
		case l.del != 0 && l.del < head:
			bad = append(bad, fmt.Sprintf("token %d: granted, but its key went at %d, before its turn at %d", tok, l.del, head))
		}
		if l.cut {
			bad = append(bad, fmt.Sprintf("token %d (%s): key deleted at %d by someone other than its owner while its lease was alive", tok, l.key, l.del))
			for _, n := range byQueue[l.queue] { // whoever's turn that deletion made
				if n.create > l.create && granted[n.create] != nil && r.headAt(byQueue[l.queue], n) == l.del {
					bad = append(bad, fmt.Sprintf("two holders: token %d granted at revision %d while token %d's owner still held it (lease alive, no Unlock)", n.create, l.del, tok))
				}
			}
		}
	}
	if r.err != nil {
		bad = append(bad, "record: "+r.err.Error())
	}
	return bad
}

// headAt returns the revision at which l became the head of queue q (sorted
// by create revision): when its last predecessor went; -1 if one never did.
func (r *record) headAt(q []*life, l *life) int64 {
	head := l.create
	for _, p := range q {
		if p.create >= l.create {
			break
		}
		if p.del == 0 {
			return -1
		}
		head = max(head, p.del)
	}
	return head
}

// twoHolders reports whether etcd's record already shows a second holder
// granted while the first still held the lock.
func (r *record) twoHolders(tr *tracker) bool {
	tr.mu.Lock()
	granted := maps.Clone(tr.granted)
	tr.mu.Unlock()
	for _, v := range r.check(granted) {
		if strings.HasPrefix(v, "two holders") {
			return true
		}
	}
	return false
}

// tracker is the library's view: the locks Lock returned whose Unlock was
// not called yet. When a lock is granted, no other tracked lock of its name
// may still believe it holds (Err nil) with its lease provably alive
// (before its ValidUntil, which is never later than etcd's expiry).
type tracker struct {
	mu         sync.Mutex
	held       map[string]map[*etcdlock.Lock]bool
	granted    map[int64]*etcdlock.Lock
	violations []string
}

func newTracker() *tracker {
	return &tracker{held: map[string]map[*etcdlock.Lock]bool{}, granted: map[int64]*etcdlock.Lock{}}
}

func (tr *tracker) grant(l *etcdlock.Lock) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for o := range tr.held[l.Name()] {
		if o.Err() == nil && now.Before(o.ValidUntil()) {
			tr.violations = append(tr.violations, fmt.Sprintf("two holders of %q: token %d (Err nil, lease valid for %v more) and token %d",
				l.Name(), o.Token(), o.ValidUntil().Sub(now).Round(time.Millisecond), l.Token()))
		}
	}
	if tr.held[l.Name()] == nil {
		tr.held[l.Name()] = map[*etcdlock.Lock]bool{}
	}
	tr.held[l.Name()][l] = true
	tr.granted[int64(l.Token())] = l
}

func (tr *tracker) release(l *etcdlock.Lock) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	delete(tr.held[l.Name()], l)
}

func (tr *tracker) found() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.violations)
}
