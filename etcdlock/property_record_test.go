package etcdlock_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// watched from before the first request, with the key's previous value,
// for the keys of locks (writers' and readers') and of semaphores (queue
// keys and permit slot keys). For each deletion of such a key that
// is not its owner's release (which writes the owner's lane marker with
// the owner's queue key's create revision in the same transaction) nor,
// for a slot's key, its owner's give-back (which rewrites the owner's
// queue key in the same transaction), it asks etcd at once whether the
// key's lease is still alive: if it is, the key was taken from a live
// session.
type record struct {
	direct  *clientv3.Client
	prefix  string
	permits int // a semaphore's

	mu      sync.Mutex
	lives   map[int64]*life // create revision -> the key's life
	foreign []int64         // create revisions of keys deleted, not by their owner's release, while their lease lived
	given   int             // slot keys given back
	last    int64
	err     error
}

// life is one key from creation to deletion.
type life struct {
	key, dir    string
	create, del int64
	lease       int64
	value       []byte // as created
	cut         bool   // deleted by someone other than its owner, lease alive
	givenBack   bool   // a slot's key deleted by its owner's give-back
}

// slotValue is a permit slot key's value (etcdlock's permitValue): the
// queue key of the acquisition holding it.
type slotValue struct {
	Key string `json:"key"`
	Rev int64  `json:"rev"`
}

func watchRecord(ctx context.Context, direct *clientv3.Client, prefix string, permits int) (*record, error) {
	resp, err := direct.Get(ctx, prefix+"start")
	if err != nil {
		return nil, err
	}
	r := &record{direct: direct, prefix: prefix, permits: permits, lives: map[int64]*life{}}
	wch := direct.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(resp.Header.Revision+1))
	go r.run(ctx, wch)
	return r, nil
}

func (r *record) run(ctx context.Context, wch clientv3.WatchChan) {
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
	markers := map[string]bool{}   // values written to lane markers in this revision
	rewritten := map[string]bool{} // queue keys rewritten (not created) in this revision
	for _, ev := range evs {
		switch key := string(ev.Kv.Key); {
		case ev.Type != mvccpb.PUT:
		case strings.HasPrefix(key, etcdlock.KeysUnder(r.prefix).Markers()):
			markers[string(ev.Kv.Value)] = true
		case ev.Kv.Version > 1:
			rewritten[key] = true
		}
	}
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		if !strings.HasPrefix(key, etcdlock.KeysUnder(r.prefix).Locks()) && !strings.HasPrefix(key, etcdlock.KeysUnder(r.prefix).Semaphores()) {
			continue
		}
		switch {
		case ev.Type == mvccpb.PUT && ev.Kv.Version == 1:
			r.mu.Lock()
			if r.lives[ev.Kv.CreateRevision] != nil && r.err == nil {
				r.err = fmt.Errorf("two keys created at %d", ev.Kv.CreateRevision)
			}
			r.lives[ev.Kv.CreateRevision] = &life{key: key, dir: key[:strings.LastIndex(key, "/")+1],
				create: ev.Kv.CreateRevision, lease: ev.Kv.Lease, value: ev.Kv.Value}
			r.mu.Unlock()
		case ev.Type == mvccpb.DELETE && ev.PrevKv != nil:
			owner, givenBack := ev.PrevKv.CreateRevision, false // the owner's queue key's create revision
			if r.isSlot(key) {
				var v slotValue
				json.Unmarshal(ev.PrevKv.Value, &v)
				owner, givenBack = v.Rev, rewritten[v.Key]
			}
			o := strconv.FormatInt(owner, 10)
			released := markers[o] || markers["gone-"+o]
			r.deleted(ctx, rev, ev.PrevKv, released, givenBack && !released)
		}
	}
}

// isSlot reports whether key is a semaphore's permit slot key,
// prefix+"sem/NAME/p/I".
func (r *record) isSlot(key string) bool {
	rest, ok := strings.CutPrefix(key, etcdlock.KeysUnder(r.prefix).Semaphores())
	parts := strings.Split(rest, "/")
	return ok && len(parts) == 3 && parts[1] == "p"
}

// deleted records the deletion at rev of the key prev: by its owner's
// release, by its owner's give-back (a slot's key), or else by someone
// else, which cuts it from its owner if its lease is still alive.
func (r *record) deleted(ctx context.Context, rev int64, prev *mvccpb.KeyValue, released, givenBack bool) {
	cut := false
	if !released && !givenBack {
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
	l.del, l.cut, l.givenBack = rev, cut, givenBack
	if cut {
		r.foreign = append(r.foreign, l.create)
	}
	if givenBack {
		r.given++
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

// givenBack returns how many slot keys were given back.
func (r *record) givenBack() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.given
}

func (r *record) foreignCopy() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.foreign)
}
