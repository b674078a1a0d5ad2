package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// SemaphoreQueue is a semaphore's queue as an operator reads it
// ([Client.InspectSemaphore]), without knowing its permits beforehand.
type SemaphoreQueue struct {
	// Queue's Holders are the acquisitions holding a permit or entitled
	// to one, in arrival order, then any permit whose acquisition's queue
	// key is gone (deleted by hand: it still holds its slot). A holder
	// that has claimed its slot has Slot set and, as Token, its permit's
	// token ([Lock.Token]: its slot key's create revision), the token it
	// fences with; one yet to claim its slot, and a waiter, have Slot -1
	// and their queue key's create revision. A waiter may claim a slot
	// for a moment before its turn, and give it back at once (PROTOCOL.md,
	// the optimistic claim): it is listed among the Waiters, and its slot
	// neither as its own nor as a holder's.
	Queue
	// Permits is the semaphore's number of permits, as its first
	// acquisition recorded it; 0 when no one holds or waits.
	Permits int
}

// InspectSemaphore reads the semaphore called name, as [Semaphore.Inspect]
// does, for a caller that does not know its permits (fencelock status):
// they are read from the acquisitions' records. It reads the queue and the
// slots' keys at one revision, then one lease TTL per distinct lease; ctx
// bounds the requests. It only reads.
func (c *Client) InspectSemaphore(ctx context.Context, name string) (SemaphoreQueue, error) {
	if err := c.checkCall(ctx, "InspectSemaphore"); err != nil {
		return SemaphoreQueue{}, err
	}
	if err := validateName(name); err != nil {
		return SemaphoreQueue{}, err
	}
	sq, _, err := c.readSemaphore(ctx, name)
	if err != nil {
		return SemaphoreQueue{}, fmt.Errorf("etcdlock: InspectSemaphore %q: %w", name, c.explain(err))
	}
	return sq, nil
}

// readSemaphore reads semaphore name's queue and permits at one revision,
// and returns its slot keys by their tokens.
func (c *Client) readSemaphore(ctx context.Context, name string) (SemaphoreQueue, map[fence.Token]heldSlot, error) {
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpGet(c.keys().semQueue(name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(c.keys().semPermits(name), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return SemaphoreQueue{}, nil, err
	}
	queue, permits := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	ttls, err := c.readTTLs(ctx, queue, permits)
	if err != nil {
		return SemaphoreQueue{}, nil, err
	}
	sq, byToken := c.keys().semaphoreOf(name, resp.Header.Revision, queue, permits, ttls)
	return sq, byToken, nil
}

// semaphoreOf is the queue of semaphore name whose queue keys are queue,
// in create order, and whose permits' keys are permits, as of revision rev,
// each entry's TTL taken from ttls; and its slot keys by their tokens. It
// does no I/O: InspectSemaphore builds its queue with it from a read,
// WatchStatus from the keys its watch keeps.
func (p layout) semaphoreOf(name string, rev int64, queue, permits []*mvccpb.KeyValue, ttls leaseTTLs) (SemaphoreQueue, map[fence.Token]heldSlot) {
	sq := SemaphoreQueue{Queue: Queue{Name: name, Rev: rev}}
	if len(queue) > 0 {
		sq.Permits = recordOf(queue[0].Value).Permits
	}
	byToken, slots := p.slotsOf(name, permits)
	orphans := maps.Clone(byToken)
	entitledN := entitled(queue, sq.Permits)
	for i, kv := range queue {
		e := entryOf(kv)
		e.Slot, e.TTL = -1, ttls.of(e.Lease)
		if s, ok := slots[e.Key]; ok && s.rev == kv.CreateRevision {
			delete(orphans, fence.Token(s.kv.CreateRevision))
			// A waiter that claimed a slot before its turn (an optimistic
			// claim, PROTOCOL.md step 5) gives it back at once: it holds
			// none.
			if i < entitledN {
				e.Slot, e.Token = s.slot, fence.Token(s.kv.CreateRevision)
			}
		}
		if i < entitledN {
			sq.Holders = append(sq.Holders, e)
		} else {
			sq.Waiters = append(sq.Waiters, e)
		}
	}
	for _, s := range slices.SortedFunc(maps.Values(orphans), func(a, b heldSlot) int { return a.slot - b.slot }) { // permits whose queue key is gone
		lease := clientv3.LeaseID(s.kv.Lease)
		sq.Holders = append(sq.Holders, Entry{Key: s.queueKey, Token: fence.Token(s.kv.CreateRevision),
			Rev: s.kv.ModRevision, Lease: lease, TTL: ttls.of(lease), Slot: s.slot})
	}
	if len(sq.Holders) > 0 {
		sq.Holder = &sq.Holders[0]
	}
	return sq, byToken
}

// heldSlot is one slot key of a semaphore, as read.
type heldSlot struct {
	kv       *mvccpb.KeyValue
	slot     int
	queueKey string // the queue key of the acquisition holding it
	rev      int64  // that key's create revision
}

// slotsOf returns the slot keys among kvs, semaphore name's, by their
// tokens and by the queue key holding each.
func (p layout) slotsOf(name string, kvs []*mvccpb.KeyValue) (map[fence.Token]heldSlot, map[string]heldSlot) {
	dir := p.semPermits(name)
	byToken, slots := map[fence.Token]heldSlot{}, map[string]heldSlot{}
	for _, kv := range kvs {
		slot, ok := permitOf(dir, string(kv.Key))
		var v permitValue
		if !ok || json.Unmarshal(kv.Value, &v) != nil {
			continue // not a slot's key of this package
		}
		h := heldSlot{kv: kv, slot: slot, queueKey: v.Key, rev: v.Rev}
		slots[v.Key], byToken[fence.Token(kv.CreateRevision)] = h, h
	}
	return byToken, slots
}

// BreakSemaphore frees a permit of the semaphore called name from a holder
// that is stuck, as [Client.Break] frees a lock: token is the permit's
// token ([Lock.Token], as [Client.InspectSemaphore] and fencelock status
// show it). In one transaction it deletes the permit's slot key, only while
// its create revision is still token, and the holder's queue key, only
// while its create revision is still the one the slot names: a
// BreakSemaphore that arrives late, twice, or after the permit changed
// hands deletes nothing. Both must go: the slot's key alone would leave the
// holder's place among the permits, its queue key alone would leave the
// slot taken. It returns the entry it freed.
//
// It fails with an error matching [ErrNotHolder] when no permit has token
// (including a holder yet to claim its slot, and a waiter holding a slot
// for a moment before its turn, PROTOCOL.md step 5), and with one matching
// [fence.ErrInvalidToken] (and [ErrInvalidArgument]) when token is not
// positive. It needs no session. The broken holder, if alive and
// connected, learns within about 150 ms (its Lock's Done closes); until
// then it can still write, and a resource fenced with its slot's tokens
// refuses its writes once the slot's next holder has written there.
func (c *Client) BreakSemaphore(ctx context.Context, name string, token fence.Token) (Entry, error) {
	if err := c.checkCall(ctx, "BreakSemaphore"); err != nil {
		return Entry{}, err
	}
	if err := validateName(name); err != nil {
		return Entry{}, err
	}
	if err := token.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%w: BreakSemaphore %q: %w", ErrInvalidArgument, name, err)
	}
	e, ok, err := c.breakPermit(ctx, name, token)
	if err != nil {
		return Entry{}, fmt.Errorf("etcdlock: BreakSemaphore %q: %w", name, c.explain(err))
	}
	if !ok {
		return Entry{}, c.notPermit(ctx, name, token)
	}
	return e, nil
}

// breakPermit deletes the permit with token and its queue key; false when
// there is none (or it changed before the delete landed).
func (c *Client) breakPermit(ctx context.Context, name string, token fence.Token) (Entry, bool, error) {
	sq, byToken, err := c.readSemaphore(ctx, name)
	if err != nil {
		return Entry{}, false, err
	}
	p, ok := byToken[token]
	if !ok {
		return Entry{}, false, nil
	}
	i := slices.IndexFunc(sq.Holders, func(e Entry) bool { return e.Slot == p.slot && e.Token == token })
	if i < 0 {
		// A waiter's claim made before its turn (an optimistic claim,
		// PROTOCOL.md step 5), given back in one round trip: no permit.
		return Entry{}, false, nil
	}
	slotKey := string(p.kv.Key)
	del, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(slotKey), "=", int64(token))).
		Then(clientv3.OpDelete(slotKey), clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(p.queueKey), "=", p.rev)},
			[]clientv3.Op{clientv3.OpDelete(p.queueKey)}, nil)).
		Commit()
	if err != nil {
		return Entry{}, false, err
	}
	return sq.Holders[i], del.Succeeded, nil
}

// notPermit is BreakSemaphore's error when no permit has token.
func (c *Client) notPermit(ctx context.Context, name string, token fence.Token) error {
	sq, _, err := c.readSemaphore(ctx, name)
	switch {
	case err != nil || len(sq.Holders) == 0:
		return fmt.Errorf("%w: semaphore %q has no permit with token %d", ErrNotHolder, name, token)
	default:
		var held []string
		for _, e := range sq.Holders {
			if e.Slot >= 0 {
				held = append(held, fmt.Sprintf("slot %d: %v", e.Slot, e))
			}
		}
		return fmt.Errorf("%w: semaphore %q has no permit with token %d (held: %s)", ErrNotHolder, name, token, strings.Join(held, "; "))
	}
}
