package etcdfence

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): unless etcd holds a higher token for key, the floor is
// token when the record is read, so from then on every write with a lower
// token is refused. The record is the one key held at that point, with
// token as its Token. A key with no value is claimed too, and the error
// matches [fence.ErrNotFound]; [Store.Get] still says so afterwards. A
// higher floor refuses the claim with a *[fence.StaleError] (Current is
// the floor) and changes nothing.
//
// It is one read-only transaction, which reads the floor and the record
// together, when the floor is token already (the holder's second touch);
// otherwise a second transaction raises the floor and reads the record in
// one raft entry, as [Store.Put] writes:
//
//	If(Value(floor) > token)  Then(Get(floor))  Else(Put(floor, token), Get(data))
//
// Errors are those of Put (bad arguments before any I/O, [ErrCorrupt] for
// a floor or record this package did not write): an error of that second
// transaction that is no refusal matches [fence.ErrUnknownOutcome], since
// the floor may have been raised; an error of the read alone changed
// nothing and is returned wrapped. A claim arriving late or twice is
// harmless: it raises the floor to token only if it is lower, which the
// caller asked for. ctx bounds the requests.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token, 0); err != nil {
		return fence.Record{}, err
	}
	ctx, w := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	c, err := s.claim(ctx, key, token)
	w.End(claimOutcome(err))
	return c.rec, err
}

// claimOutcome is the outcome telemetry counts for a claim: one that
// found no value claimed the key all the same.
func claimOutcome(err error) error {
	if errors.Is(err, fence.ErrNotFound) {
		return nil
	}
	return err
}

// claimed is what a claim read: the record, the mod revision of the data
// key that held it (0 when it held none), and the mod revision of the
// floor key once it was token, which an Update's write compares.
type claimed struct {
	rec      fence.Record
	rev      int64
	floorRev int64
}

// claim reads the floor and the record in one read-only transaction, and
// raises the floor only when it is below token: a holder's repeated reads
// then cost no raft entry.
func (s *Store) claim(ctx context.Context, key string, token fence.Token) (claimed, error) {
	resp, err := s.kv.Txn(ctx).Then(clientv3.OpGet(s.FloorKey(key)), clientv3.OpGet(s.DataKey(key))).Commit()
	if err != nil {
		return claimed{}, fmt.Errorf("etcdfence: get %q for update: %w", key, err)
	}
	s.saw(resp.Header)
	tok := padToken(token)
	switch floor := firstKV(resp, 0); {
	case floor == nil || string(floor.Value) < tok:
		return s.raise(ctx, key, token)
	case string(floor.Value) > tok:
		return claimed{}, staleError(key, token, floor)
	}
	s.floors.set(key, token)
	c, err := readClaimed(key, token, firstKV(resp, 1))
	c.floorRev = firstKV(resp, 0).ModRevision
	return c, err
}

// raise raises key's floor to token and reads its record, in one
// transaction that is fenced as Put's.
func (s *Store) raise(ctx context.Context, key string, token fence.Token) (claimed, error) {
	floor, tok := s.FloorKey(key), padToken(token)
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(floor), ">", tok)).
		Then(clientv3.OpGet(floor)).
		Else(clientv3.OpPut(floor, tok), clientv3.OpGet(s.DataKey(key))).
		Commit()
	if err != nil {
		return claimed{}, writeError(opGetForUpdate, key, token, err)
	}
	s.saw(resp.Header)
	if resp.Succeeded {
		return claimed{}, refusal(key, token, resp)
	}
	s.floors.set(key, token)
	c, err := readClaimed(key, token, firstKV(resp, 1))
	c.floorRev = resp.Header.Revision // the Put of the floor, this transaction's revision
	return c, err
}

// readClaimed returns the claim of key for token that read data (nil: no
// value).
func readClaimed(key string, token fence.Token, data *mvccpb.KeyValue) (claimed, error) {
	if data == nil {
		return claimed{}, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	rec, err := decodeRecord(key, data.Value)
	if err != nil {
		return claimed{}, err
	}
	rec.Token = token
	return claimed{rec: rec, rev: data.ModRevision}, nil
}

// firstKV returns the key a transaction's i-th operation, a Get, read, or
// nil if it read none.
func firstKV(resp *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if i >= len(resp.Responses) {
		return nil
	}
	kvs := resp.Responses[i].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}
