package etcdlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// The checker of the queue kinds' runs: etcd's record (property_record_test.go)
// against the grants the tracker saw (property_tracker_test.go).

// check compares etcd's record with the acquisitions granted.
func (r *record) check(granted map[int64]*propGrant) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byDir := map[string][]*life{}
	for _, l := range r.lives {
		byDir[l.dir] = append(byDir[l.dir], l)
	}
	for _, q := range byDir {
		slices.SortFunc(q, func(a, b *life) int { return int(a.create - b.create) })
	}
	var bad []string
	for _, tok := range slices.Sorted(maps.Keys(granted)) {
		g, l := granted[tok], r.lives[tok]
		switch {
		case l == nil:
			bad = append(bad, fmt.Sprintf("token %d: granted, etcd never created it", tok))
		case r.isSlot(l.key):
			bad = append(bad, r.checkSem(g, l, byDir, granted)...)
		default:
			bad = append(bad, r.checkQueue(g, l, byDir[l.dir], granted)...)
		}
	}
	for _, l := range r.lives {
		if r.isSlot(l.key) {
			if i, _ := strconv.Atoi(l.key[strings.LastIndex(l.key, "/")+1:]); i >= r.permits {
				bad = append(bad, fmt.Sprintf("slot key %s beyond %d permits", l.key, r.permits))
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
func turnAt(q []*life, l *life) int64 {
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

// checkQueue checks one granted lock: it was granted in its turn (by the
// revision read just after Lock returned), its key lived until then, and
// it was taken from no live holder.
func (r *record) checkQueue(g *propGrant, l *life, q []*life, granted map[int64]*propGrant) []string {
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
// than permits acquisitions queued before it, when it was claimed; the
// slot was taken from no live holder, and its holder did not give it
// back (a give-back is of a claim made before the turn, never granted).
func (r *record) checkSem(g *propGrant, l *life, byDir map[string][]*life, granted map[int64]*propGrant) []string {
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
	if ahead >= r.permits {
		bad = append(bad, fmt.Sprintf("before its turn: token %d claimed its slot with %d acquisitions queued before it", tok, ahead))
	}
	if l.givenBack {
		bad = append(bad, fmt.Sprintf("slot key deleted: %s (token %d) given back at %d by its owner, which was granted it", l.key, tok, l.del))
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
func (r *record) orphanSlots(ctx context.Context) []string {
	resp, err := r.direct.Get(ctx, etcdlock.KeysUnder(r.prefix).Semaphores(), clientv3.WithPrefix())
	if err != nil {
		return []string{err.Error()}
	}
	queued := map[string]int64{}
	for _, kv := range resp.Kvs {
		queued[string(kv.Key)] = kv.CreateRevision
	}
	var bad []string
	for _, kv := range resp.Kvs {
		if !r.isSlot(string(kv.Key)) {
			continue
		}
		var v slotValue
		if json.Unmarshal(kv.Value, &v) != nil || queued[v.Key] != v.Rev {
			bad = append(bad, fmt.Sprintf("slot key %s left without its queue key (%s)", kv.Key, kv.Value))
		}
	}
	return bad
}
