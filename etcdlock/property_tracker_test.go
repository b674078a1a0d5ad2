package etcdlock_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// tracker is the library's view: the locks granted whose Unlock was not
// called yet. When a lock is granted, the other tracked locks of its name
// that still believe they hold (Err nil) with their lease provably alive
// (before ValidUntil, never later than etcd's expiry) must allow it.
type tracker struct {
	direct  *clientv3.Client // set once before use
	prefix  string
	permits int // a semaphore's

	mu         sync.Mutex
	held       map[string]map[*propGrant]bool
	granted    map[int64]*propGrant // token -> its grant
	slotTok    map[string]int64     // name/slot -> the greatest token granted on it
	most       int                  // the most holders of one name seen at a grant, the granted one included
	violations []string
}

func (tr *tracker) grant(ctx context.Context, l *etcdlock.Lock, h propHeld) {
	now := time.Now()
	g := &propGrant{l: l, at: now, writer: h.writer, slot: h.slot}
	if h.turn { // serializable: the run's one member has applied what the grant saw
		if resp, err := tr.direct.Get(ctx, tr.prefix+"granted", clientv3.WithSerializable()); err == nil {
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
		if v := conflict(o, g, o.l.ValidUntil().Sub(now).Round(time.Millisecond)); v != "" {
			tr.violations = append(tr.violations, v)
		}
	}
	tr.most = max(tr.most, holding+1)
	if h.slot {
		tr.permit(l, holding)
	}
	if tr.held[l.Name()] == nil {
		tr.held[l.Name()] = map[*propGrant]bool{}
	}
	tr.held[l.Name()][g] = true
	tr.granted[int64(l.Token())] = g
}

// conflict describes g granted while o holds with its lease valid for
// left more, if they exclude each other.
func conflict(o, g *propGrant, left time.Duration) string {
	name := g.l.Name()
	switch {
	case g.slot && o.l.Slot() == g.l.Slot():
		return fmt.Sprintf("two holders of slot %d of %q: token %d (Err nil, lease valid for %v more) and token %d",
			g.l.Slot(), name, o.l.Token(), left, g.l.Token())
	case g.writer && o.writer:
		return fmt.Sprintf("two holders of %q: token %d (Err nil, lease valid for %v more) and token %d", name, o.l.Token(), left, g.l.Token())
	case g.writer || o.writer:
		return fmt.Sprintf("writer beside another holder of %q: token %d (writer %v, Err nil, lease valid for %v more) and token %d (writer %v)",
			name, o.l.Token(), o.writer, left, g.l.Token(), g.writer)
	}
	return ""
}

// permit checks a semaphore's permit granted beside holding others:
// at most tr.permits holders, a slot's tokens increasing.
func (tr *tracker) permit(l *etcdlock.Lock, holding int) {
	if holding >= tr.permits {
		tr.violations = append(tr.violations, fmt.Sprintf("more than %d holders of %q: token %d granted beside %d", tr.permits, l.Name(), l.Token(), holding))
	}
	slot := fmt.Sprintf("%s/%d", l.Name(), l.Slot())
	if int64(l.Token()) <= tr.slotTok[slot] {
		tr.violations = append(tr.violations, fmt.Sprintf("slot tokens not increasing: token %d on slot %s after %d", l.Token(), slot, tr.slotTok[slot]))
	}
	tr.slotTok[slot] = max(tr.slotTok[slot], int64(l.Token()))
}

func (tr *tracker) release(l *etcdlock.Lock) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for g := range tr.held[l.Name()] {
		if g.l == l {
			delete(tr.held[l.Name()], g)
		}
	}
}

// mostHolding returns the most holders of one name seen at a grant.
func (tr *tracker) mostHolding() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.most
}

func (tr *tracker) violationsCopy() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.violations)
}

func (tr *tracker) grantedCopy() map[int64]*propGrant {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.granted)
}
