package etcdlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// kindRecord is etcd's own record of a test prefix, as record is, for the
// keys of read/write locks (readers' and writers') and of semaphores
// (queue keys and permit slot keys). For each deletion of such a key that
// is not its owner's release (which writes the owner's lane marker with
// the owner's queue key's create revision in the same transaction), it
// asks etcd at once whether the key's lease is still alive: if it is, the
// key was taken from a live session.
type kindRecord struct {
	direct *clientv3.Client
	prefix string

	mu      sync.Mutex
	lives   map[int64]*klife // create revision -> the key's life
	foreign []int64          // create revisions of keys deleted, not by their owner's release, while their lease lived
	last    int64
	err     error
}

// klife is one key from creation to deletion.
type klife struct {
	key, dir    string
	create, del int64
	lease       int64
	value       []byte // as created
	cut         bool   // deleted by someone other than its owner, lease alive
}

// slotValue is a permit slot key's value (etcdlock's permitValue): the
// queue key of the acquisition holding it.
type slotValue struct {
	Key string `json:"key"`
	Rev int64  `json:"rev"`
}

func watchKindRecord(ctx context.Context, direct *clientv3.Client, prefix string) (*kindRecord, error) {
	resp, err := direct.Get(ctx, prefix+"start")
	if err != nil {
		return nil, err
	}
	r := &kindRecord{direct: direct, prefix: prefix, lives: map[int64]*klife{}}
	wch := direct.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(resp.Header.Revision+1))
	go r.run(ctx, wch)
	return r, nil
}

func (r *kindRecord) run(ctx context.Context, wch clientv3.WatchChan) {
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
func (r *kindRecord) apply(ctx context.Context, rev int64, evs []*clientv3.Event) {
	markers := map[string]bool{} // values written to lane markers in this revision
	for _, ev := range evs {
		if ev.Type == mvccpb.PUT && strings.HasPrefix(string(ev.Kv.Key), etcdlock.KeysUnder(r.prefix).Markers()) {
			markers[string(ev.Kv.Value)] = true
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
			r.lives[ev.Kv.CreateRevision] = &klife{key: key, dir: key[:strings.LastIndex(key, "/")+1],
				create: ev.Kv.CreateRevision, lease: ev.Kv.Lease, value: ev.Kv.Value}
			r.mu.Unlock()
		case ev.Type == mvccpb.DELETE && ev.PrevKv != nil:
			owner := ev.PrevKv.CreateRevision // the owner's queue key's create revision
			if r.isSlot(key) {
				var v slotValue
				json.Unmarshal(ev.PrevKv.Value, &v)
				owner = v.Rev
			}
			o := strconv.FormatInt(owner, 10)
			r.deleted(ctx, rev, ev.PrevKv, markers[o] || markers["gone-"+o])
		}
	}
}

// isSlot reports whether key is a semaphore's permit slot key,
// prefix+"sem/NAME/p/I".
func (r *kindRecord) isSlot(key string) bool {
	rest, ok := strings.CutPrefix(key, etcdlock.KeysUnder(r.prefix).Semaphores())
	parts := strings.Split(rest, "/")
	return ok && len(parts) == 3 && parts[1] == "p"
}

func (r *kindRecord) deleted(ctx context.Context, rev int64, prev *mvccpb.KeyValue, released bool) {
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
	l.del, l.cut = rev, cut
	if cut {
		r.foreign = append(r.foreign, l.create)
	}
}

func (r *kindRecord) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// catchUp waits until the record has seen revision rev.
func (r *kindRecord) catchUp(ctx context.Context, rev int64) error {
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

func (r *kindRecord) foreignCopy() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.foreign)
}

// check compares etcd's record with the acquisitions granted.
func (r *kindRecord) check(cfg kindsConfig, granted map[int64]*kgrant) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byDir := map[string][]*klife{}
	for _, l := range r.lives {
		byDir[l.dir] = append(byDir[l.dir], l)
	}
	for _, q := range byDir {
		slices.SortFunc(q, func(a, b *klife) int { return int(a.create - b.create) })
	}
	var bad []string
	for _, tok := range slices.Sorted(maps.Keys(granted)) {
		g, l := granted[tok], r.lives[tok]
		switch {
		case l == nil:
			bad = append(bad, fmt.Sprintf("token %d: granted, etcd never created it", tok))
		case cfg.rw:
			bad = append(bad, r.checkRW(g, l, byDir[l.dir], granted)...)
		default:
			bad = append(bad, r.checkSem(cfg, g, l, byDir, granted)...)
		}
	}
	for _, l := range r.lives {
		if r.isSlot(l.key) {
			if i, _ := strconv.Atoi(l.key[strings.LastIndex(l.key, "/")+1:]); i >= cfg.permits {
				bad = append(bad, fmt.Sprintf("slot key %s beyond %d permits", l.key, cfg.permits))
			}
		}
	}
	if r.err != nil {
		bad = append(bad, "record: "+r.err.Error())
	}
	return bad
}

func isReader(key string) bool { return strings.HasPrefix(key[strings.LastIndex(key, "/")+1:], "r") }

// turnAt returns the revision at which l, a key of queue q (sorted by
// create revision), had its turn: when the last of its blockers went (the
// writers queued before it for a reader, every key for a writer); -1 if
// one never did.
func turnAt(q []*klife, l *klife) int64 {
	turn := l.create
	for _, p := range q {
		if p.create >= l.create {
			break
		}
		if isReader(l.key) && isReader(p.key) {
			continue
		}
		if p.del == 0 {
			return -1
		}
		turn = max(turn, p.del)
	}
	return turn
}

// checkRW checks one granted lock: it was granted in its turn (by the
// revision read just after Lock returned), its key lived until then, and
// it was taken from no live holder.
func (r *kindRecord) checkRW(g *kgrant, l *klife, q []*klife, granted map[int64]*kgrant) []string {
	var bad []string
	what := "reader"
	if !isReader(l.key) {
		what = "writer"
	}
	switch turn := turnAt(q, l); {
	case turn < 0:
		bad = append(bad, fmt.Sprintf("before its turn: %s token %d granted while a key queued before it that blocks it still exists", what, l.create))
	case g.rev != 0 && turn > g.rev:
		bad = append(bad, fmt.Sprintf("before its turn: %s token %d granted by revision %d, its turn came at %d", what, l.create, g.rev, turn))
	case l.del != 0 && l.del < turn:
		bad = append(bad, fmt.Sprintf("before its turn: %s token %d granted, its key went at %d, before its turn at %d", what, l.create, l.del, turn))
	}
	if l.cut {
		bad = append(bad, fmt.Sprintf("hold key deleted: %s token %d (%s) deleted at %d by someone other than its owner while its lease was alive", what, l.create, l.key, l.del))
		for _, n := range q { // whoever's turn that deletion made
			if n.create > l.create && granted[n.create] != nil && turnAt(q, n) == l.del {
				bad = append(bad, fmt.Sprintf("two holders: token %d granted at revision %d while token %d's owner still held it", n.create, l.del, l.create))
			}
		}
	}
	return bad
}

// checkSem checks one granted permit: its token is its slot key's create
// revision, the slot key names its queue key, which lived, with fewer
// than permits acquisitions queued before it, when it was claimed; and
// the slot was taken from no live holder.
func (r *kindRecord) checkSem(cfg kindsConfig, g *kgrant, l *klife, byDir map[string][]*klife, granted map[int64]*kgrant) []string {
	tok := l.create
	name := strings.TrimPrefix(strings.TrimSuffix(l.dir, "/p/"), etcdlock.KeysUnder(r.prefix).Semaphores())
	if want := etcdlock.KeysUnder(r.prefix).Permit(name, g.l.Slot()); l.key != want {
		return []string{fmt.Sprintf("token %d: slot %d, but the key created at its token is %s", tok, g.l.Slot(), l.key)}
	}
	var v slotValue
	if err := json.Unmarshal(l.value, &v); err != nil || v.Key != g.l.Key() {
		return []string{fmt.Sprintf("token %d: slot key %s names %q, not the holder's queue key %s", tok, l.key, l.value, g.l.Key())}
	}
	var bad []string
	qk := r.lives[v.Rev]
	switch {
	case qk == nil || qk.key != v.Key:
		return []string{fmt.Sprintf("token %d: its queue key %s was never created at %d", tok, v.Key, v.Rev)}
	case qk.del != 0 && qk.del <= tok:
		bad = append(bad, fmt.Sprintf("token %d: slot claimed at %d, after its queue key went at %d", tok, tok, qk.del))
	}
	ahead := 0
	for _, p := range byDir[qk.dir] {
		if p.create < qk.create && (p.del == 0 || p.del > tok) {
			ahead++
		}
	}
	if ahead >= cfg.permits {
		bad = append(bad, fmt.Sprintf("before its turn: token %d claimed its slot with %d acquisitions queued before it", tok, ahead))
	}
	if l.cut {
		bad = append(bad, fmt.Sprintf("slot key deleted: %s (token %d) deleted at %d by someone other than its owner while its lease was alive", l.key, tok, l.del))
		for _, n := range byDir[l.dir] { // the next holder of the slot
			if n.key == l.key && n.create > l.del {
				if granted[n.create] != nil {
					bad = append(bad, fmt.Sprintf("two holders of slot: token %d claimed %s at %d while token %d's owner still held it", n.create, l.key, n.create, tok))
				}
				break
			}
		}
	}
	return bad
}

// orphanSlots returns the permit slot keys whose queue key is gone, left
// by a claim that landed after its acquisition's release.
func orphanSlots(t *testing.T, rec *kindRecord) []string {
	resp, err := rec.direct.Get(t.Context(), etcdlock.KeysUnder(rec.prefix).Semaphores(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	queued := map[string]int64{}
	for _, kv := range resp.Kvs {
		queued[string(kv.Key)] = kv.CreateRevision
	}
	var bad []string
	for _, kv := range resp.Kvs {
		if !rec.isSlot(string(kv.Key)) {
			continue
		}
		var v slotValue
		if json.Unmarshal(kv.Value, &v) != nil || queued[v.Key] != v.Rev {
			bad = append(bad, fmt.Sprintf("slot key %s left without its queue key (%s)", kv.Key, kv.Value))
		}
	}
	return bad
}

// kgrant is one acquisition granted.
type kgrant struct {
	l      *etcdlock.Lock
	writer bool
	rev    int64 // a revision read just after it was granted (read/write locks); 0 if unknown
}

// kindTracker is the library's view: the locks granted whose Unlock was
// not called yet. When a lock is granted, the other tracked locks of its
// name that still believe they hold (Err nil) with their lease provably
// alive (before ValidUntil) must allow it.
type kindTracker struct {
	cfg    kindsConfig
	direct *clientv3.Client
	prefix string

	mu         sync.Mutex
	held       map[string]map[*kgrant]bool
	granted    map[int64]*kgrant
	slotTok    map[string]int64 // name/slot -> the greatest token granted on it
	most       int              // the most holders of one name seen at a grant, the granted one included
	violations []string
}

func newKindTracker(cfg kindsConfig, direct *clientv3.Client, prefix string) *kindTracker {
	return &kindTracker{cfg: cfg, direct: direct, prefix: prefix, held: map[string]map[*kgrant]bool{},
		granted: map[int64]*kgrant{}, slotTok: map[string]int64{}}
}

func (tr *kindTracker) grant(ctx context.Context, l *etcdlock.Lock, writer bool) {
	now := time.Now()
	g := &kgrant{l: l, writer: writer}
	if tr.cfg.rw {
		if resp, err := tr.direct.Get(ctx, tr.prefix+"granted"); err == nil {
			g.rev = resp.Header.Revision
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	holding := 0
	for o := range tr.held[l.Name()] {
		if o.l.Err() != nil || !now.Before(o.l.ValidUntil()) {
			continue
		}
		holding++
		left := o.l.ValidUntil().Sub(now).Round(time.Millisecond)
		switch {
		case tr.cfg.rw && (writer || o.writer):
			tr.violations = append(tr.violations, fmt.Sprintf("writer beside another holder of %q: token %d (writer %v, Err nil, lease valid for %v more) and token %d (writer %v)",
				l.Name(), o.l.Token(), o.writer, left, l.Token(), writer))
		case !tr.cfg.rw && o.l.Slot() == l.Slot():
			tr.violations = append(tr.violations, fmt.Sprintf("two holders of slot %d of %q: token %d (Err nil, lease valid for %v more) and token %d",
				l.Slot(), l.Name(), o.l.Token(), left, l.Token()))
		}
	}
	tr.most = max(tr.most, holding+1)
	if !tr.cfg.rw {
		if holding >= tr.cfg.permits {
			tr.violations = append(tr.violations, fmt.Sprintf("more than %d holders of %q: token %d granted beside %d", tr.cfg.permits, l.Name(), l.Token(), holding))
		}
		slot := fmt.Sprintf("%s/%d", l.Name(), l.Slot())
		if int64(l.Token()) <= tr.slotTok[slot] {
			tr.violations = append(tr.violations, fmt.Sprintf("slot tokens not increasing: token %d on slot %s after %d", l.Token(), slot, tr.slotTok[slot]))
		}
		tr.slotTok[slot] = max(tr.slotTok[slot], int64(l.Token()))
	}
	if tr.held[l.Name()] == nil {
		tr.held[l.Name()] = map[*kgrant]bool{}
	}
	tr.held[l.Name()][g] = true
	tr.granted[int64(l.Token())] = g
}

func (tr *kindTracker) release(l *etcdlock.Lock) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for g := range tr.held[l.Name()] {
		if g.l == l {
			delete(tr.held[l.Name()], g)
		}
	}
}

// mostHolding returns the most holders of one name seen at a grant.
func (tr *kindTracker) mostHolding() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.most
}

func (tr *kindTracker) found() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.violations)
}

func (tr *kindTracker) violationsCopy() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.violations)
}

func (tr *kindTracker) grantedCopy() map[int64]*kgrant {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.granted)
}
