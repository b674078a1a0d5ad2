package etcdfence

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// The operations of a Store that telemetry names, besides put and delete.
const (
	opGetForUpdate = "get_for_update"
	opUpdate       = "update"
)

// Update is a read-modify-write of key with token (see [fence.Updater]):
// it claims key and reads its record as [Store.GetForUpdate] does, calls
// fn with it (the zero Record when key holds no value), and writes fn's
// result with token in one transaction that lands only if neither the
// floor nor the record changed since the read:
//
//	If(ModRevision(floor) = read's, ModRevision(data) = read's)  Then(Put(data, record))  Else(Get(floor))
//
// (A data key with no value has mod revision 0; the floor's revision read
// is the claim's own when the claim raised it.) The floor was token at
// the read, since the read claimed it, so an unchanged floor is token
// still and the write need not raise it; a newer holder's claim or write
// changes the floor, and a write with the same token changes the data
// key's mod revision. Every Put and Delete writes the floor again, so a
// Delete with the same token, which leaves the data key absent (mod
// revision 0 again), changes the floor's: a copy of a write that created
// the key does not bring it back. On such a change Update reads
// again and calls fn again, up to [fence.UpdateAttempts] times in all,
// then returns an error matching [fence.ErrConflict]. A higher floor, at
// the read or at the write, gives a *[fence.StaleError]; at the read, fn
// is not called.
//
// fn's error is returned as it is, and a panic in fn is passed on: nothing
// is written either way, though the claim stays. A value too large for one
// request gives [ErrValueTooLarge], and nothing is written. Update refuses
// an empty key, a token that is not positive, a nil fn and a nil or ended
// ctx before any I/O.
//
// When the write's reply is lost, the error matches
// [fence.ErrUnknownOutcome], as Put's does: the key holds the record read
// or fn's, once; read it back before deciding. A copy of the write that
// arrives late or twice lands only if the record is still the one read,
// so it never applies fn's result over a newer write, and never twice. A
// claim whose reply is lost gives the same error (the floor may have been
// raised; fn's value was not written). The write waits for the Store's
// other writes of key under way (Puts, Deletes, Updates), as they wait for
// each other; if ctx ends meanwhile, Update returns its error, the write
// not sent. ctx bounds the whole call.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token, 0); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

// rounds is a Store's [fence.UpdateRounds] and [fence.UpdateAllRounds]:
// its Update and UpdateAll are fence's loop over them.
type rounds Store

// StartUpdate starts an Update's span.
func (r *rounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead claims key and reads its record, as GetForUpdate does.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, claimed, error) {
	c, err := (*Store)(r).claim(ctx, key, token)
	return c.rec, c, err
}

// WriteIf writes v under key with token if the floor and the record are
// still those c read.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, c claimed, v []byte) error {
	s := (*Store)(r)
	// The write's Txn names the data key twice (its compare and its put),
	// where checkSize counts Put's once.
	if err := s.checkSize(key, len(v)+len(s.DataKey(key))); err != nil {
		return err
	}
	ok, err := s.writeIf(ctx, key, token, c, v)
	if !ok && err == nil {
		return fence.ErrChanged
	}
	return err
}

// writeIf writes v under key with token if the floor's and the data key's
// mod revisions are still those c read; it reports false, with no error,
// when one changed. It puts the floor too, as every write does: a Put of
// the same token sent before it, arriving late, then finds a floor of its
// token put past the revision it was sent with, and is refused (see
// fencedWrite). It takes key's turn with the Store's other writes of key.
func (s *Store) writeIf(ctx context.Context, key string, token fence.Token, c claimed, v []byte) (bool, error) {
	leave, err := s.turns(ctx, opUpdate, key)
	if err != nil {
		return false, err
	}
	defer leave()
	floor, data, tok := s.FloorKey(key), s.DataKey(key), padToken(token)
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(floor), "=", c.floorRev), clientv3.Compare(clientv3.ModRevision(data), "=", c.rev)).
		Then(clientv3.OpPut(floor, tok), clientv3.OpPut(data, encodeRecord(token, v))).
		Else(clientv3.OpGet(floor)).
		Commit()
	if err != nil {
		return false, writeError(opUpdate, key, token, err)
	}
	s.saw(resp.Header)
	if resp.Succeeded {
		s.floors.set(key, token)
		return true, nil
	}
	// Refused: by a higher floor, or (a floor of token written again, or
	// none: deleted by other means) by a changed floor or record, which
	// the next attempt reads.
	if f := firstKV(resp, 0); f != nil && string(f.Value) > tok {
		return false, staleError(key, token, f)
	}
	return false, nil
}
