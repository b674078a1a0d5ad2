package etcdfence

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// claimedAll is what an UpdateAll's claim read: each key's record (the
// zero Record for none), the mod revision of each claim's data key (0
// when it held none), and that of each claim's floor once it was the
// claim's token, which the write compares.
type claimedAll struct {
	old       map[string]fence.Record
	revs      []int64
	floorRevs []int64
}

// claimAll reads every claim's floor and record in one read-only
// transaction, and raises the floors below their tokens in a second, which
// lands only if none of them changed since. It reports false, with no
// error, when one had: the caller reads again.
func (s *Store) claimAll(ctx context.Context, set []fence.Claim) (claimedAll, bool, error) {
	ops := make([]clientv3.Op, 0, 2*len(set))
	for _, c := range set {
		ops = append(ops, clientv3.OpGet(s.FloorKey(c.Resource)), clientv3.OpGet(s.DataKey(c.Resource)))
	}
	resp, err := s.kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return claimedAll{}, false, fmt.Errorf("etcdfence: get %q for update: %w", fence.ClaimsLabel(set), err)
	}
	s.saw(resp.Header)
	var low []int // the claims whose floor is below their token, or absent
	data := make([]*mvccpb.KeyValue, len(set))
	floorRevs := make([]int64, len(set))
	for i, c := range set {
		floor, tok := firstKV(resp, 2*i), padToken(c.Token)
		switch {
		case floor == nil || string(floor.Value) < tok:
			low = append(low, i)
		case string(floor.Value) > tok:
			return claimedAll{}, false, staleError(c.Resource, c.Token, floor)
		default:
			floorRevs[i] = floor.ModRevision
		}
		data[i] = firstKV(resp, 2*i+1)
	}
	if len(low) > 0 {
		return s.raiseAll(ctx, set, resp, low, floorRevs)
	}
	return readAll(set, data, floorRevs)
}

// raiseAll raises the floors of the claims low to their tokens, if each is
// still as read (its mod revision, 0 for none), and reads every record,
// in one transaction. floorRevs holds the mod revisions of the other
// floors, read at their tokens; the raised ones get the transaction's.
func (s *Store) raiseAll(ctx context.Context, set []fence.Claim, read *clientv3.TxnResponse, low []int, floorRevs []int64) (claimedAll, bool, error) {
	cmps := make([]clientv3.Cmp, 0, len(low))
	ops := make([]clientv3.Op, 0, len(low)+len(set))
	for _, i := range low {
		floor, rev := s.FloorKey(set[i].Resource), int64(0)
		if kv := firstKV(read, 2*i); kv != nil {
			rev = kv.ModRevision
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(floor), "=", rev))
		ops = append(ops, clientv3.OpPut(floor, padToken(set[i].Token)))
	}
	for _, c := range set {
		ops = append(ops, clientv3.OpGet(s.DataKey(c.Resource)))
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return claimedAll{}, false, writeError(opUpdateAll, fence.ClaimsLabel(set), set[0].Token, err)
	}
	s.saw(resp.Header)
	if !resp.Succeeded {
		return claimedAll{}, false, nil // a floor moved: read again
	}
	for _, i := range low {
		floorRevs[i] = resp.Header.Revision // the Puts of the floors, this transaction's revision
	}
	data := make([]*mvccpb.KeyValue, len(set))
	for i := range set {
		data[i] = firstKV(resp, len(low)+i)
	}
	return readAll(set, data, floorRevs)
}

// readAll decodes the records read for set (a nil: no value).
func readAll(set []fence.Claim, data []*mvccpb.KeyValue, floorRevs []int64) (claimedAll, bool, error) {
	c := claimedAll{old: make(map[string]fence.Record, len(set)), revs: make([]int64, len(set)), floorRevs: floorRevs}
	for i, cl := range set {
		r, err := readClaimed(cl.Resource, cl.Token, data[i])
		if err != nil && !errors.Is(err, fence.ErrNotFound) {
			return claimedAll{}, false, err
		}
		c.old[cl.Resource], c.revs[i] = r.rec, r.rev
	}
	return c, true, nil
}

var _ fence.AllUpdater = (*Store)(nil)
