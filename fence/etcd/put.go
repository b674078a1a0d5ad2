package etcdfence

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// requestFraming is the allowance, in bytes, for everything of a write's
// etcd request besides its keys, tokens and value: the protobuf tags and
// lengths of the transaction and its operations, and the raft request's
// header (its ID, the user name and auth revision when auth is on).
const requestFraming = 256

// Put stores value under key with token, unless etcd holds a higher token
// for key: then it returns a *[fence.StaleError] (matching
// [fence.ErrStale], with the floor etcd read as Current) and changes
// nothing. A token equal to the floor is accepted. The check and the write
// are one etcd transaction, one raft entry.
//
// Put returns an error matching [fence.ErrInvalidKey] or
// [fence.ErrInvalidToken], and [ErrValueTooLarge] for a value that would
// not fit in one etcd request ([WithMaxRequestBytes]), before any I/O.
// When etcd gives no answer (the connection broke, the context ended
// after the request was sent, the request timed out in raft) the error is
// a *[fence.UnknownOutcomeError] matching [fence.ErrUnknownOutcome], with
// the client's error as its cause: the key then holds the old record or
// the new one, whole, and the request may still be applied later. It is
// then fenced as if it had just arrived, and also refused if a write of
// the same token has landed on key since it was sent, so that it cannot
// replace that later write. Any other error is etcd's refusal of the
// request, and nothing was written.
//
// A Store sends its Puts and Deletes of one key one at a time; one that
// waits for those before it and sees ctx end returns ctx's error, nothing
// sent. Writes of the same token to key that this Store did not make (an
// Update, a Store in another process the token was passed to) can make a
// write find the floor stamped as high as its own (see the package
// documentation); it is then sent again, stamped past that write, at most
// [fence.UpdateAttempts] times in all, and then fails with an error
// matching [fence.ErrConflict], nothing written.
//
// ctx bounds the request. If it has ended already, Put returns its error
// and sends nothing.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if err := s.checkWrite(ctx, key, token, len(value)); err != nil {
		return err
	}
	return s.fencedWrite(ctx, "put", key, token, clientv3.OpPut(s.DataKey(key), encodeRecord(token, value)))
}

// Delete removes the record under key, fenced like [Store.Put]: unless etcd
// holds a higher token for key, it deletes the data key and raises the
// floor to token, in one transaction. The floor stays: [Store.Get] then
// reports [fence.ErrNotFound], a later Put with a lower token is refused
// with [fence.ErrStale], and one with a token at least as high writes the
// key again. Deleting a key never written sets its floor. Results, errors
// and the role of ctx are those of Put.
//
// Deleting the floor key by other means (etcdctl del, a lease attached
// to it; etcd's compaction deletes no key) removes the floor: the next Put
// lands whatever its token, as on a new key.
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	if err := s.checkWrite(ctx, key, token, 0); err != nil {
		return err
	}
	return s.fencedWrite(ctx, "delete", key, token, clientv3.OpDelete(s.DataKey(key)))
}

// checkWrite validates a write before any I/O.
func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token, size int) error {
	if token <= 0 {
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	}
	if err := s.checkCall(ctx, key); err != nil {
		return err
	}
	return s.checkSize(key, size)
}

// checkSize refuses, before any I/O, a write of size bytes under key whose
// request would be larger than etcd takes.
func (s *Store) checkSize(key string, size int) error {
	// The floor key thrice (the compare, the refusal's Get, the Put), two
	// floor values (the compare's and the Put's), the data key and the
	// record's token.
	est := size + 3*len(s.FloorKey(key)) + len(s.DataKey(key)) + 2*floorLen + TokenDigits + requestFraming
	if est > s.opts.maxRequestBytes {
		return fmt.Errorf("%w: a %d-byte value under %q makes a request of about %d bytes, over the limit of %d (WithMaxRequestBytes)",
			ErrValueTooLarge, size, key, est, s.opts.maxRequestBytes)
	}
	return nil
}

// fencedWrite sends the one transaction of a write whose data operation is
// op, stamped with 1 + the last revision the Store saw (see [floorValue]):
//
//	If(Value(floor) > token:stamp-1)  Then(Get(floor))
//	Else(Put(floor, token:stamp), op)
//
// A write lands in the Else branch. That is what makes one transaction
// enough: etcd fails every Value compare on a missing key, so a key never
// written (no floor) takes the Else branch and is written, as the
// contract's first write must be. The Then branch reads the floor, so a
// refusal says what it was refused against. Tokens and stamps are stored
// zero-padded to [TokenDigits] digits, so the byte-wise compare is the
// numeric one: a floor of a lower token lets the write land, as does a
// floor of its own token with a lower stamp (or none, as version 0.1.0
// wrote floors); a higher token refuses it, and so does a floor of its
// own token put by a write stamped as high or higher.
//
// That last refusal keeps a holder's writes in the order it made them.
// Every write puts the floor with its stamp, and a Store's stamps only
// grow: a later write's stamp is above the revisions of the Store's
// writes that were answered before it was sent, and no lower than the
// stamp of any write sent before it. So a copy of a write delivered twice,
// or the write itself arriving late after a later write of the same token
// landed, finds the floor stamped at least as high as its own, and changes
// nothing: without it, the copy would replace the later write, as tokens
// equal to the floor are not fenced against each other. A stamp is never
// above the revision its write lands at, since the Store saw that revision
// only from a reply to a request applied before. A write of the same
// token stamped higher than this one, by a holder of the token that does
// not share this Store or by a write of this Store whose reply was lost,
// turns it back too: the reply's header then gives a revision at or past
// that floor's stamp, and the write is sent again with a stamp above it,
// up to [fence.UpdateAttempts] times.
//
// Delivery faults are safe because etcd evaluates the compare when it
// applies the entry, against the floor as it is then:
//
//   - late (a paused holder's request, or one its caller gave up on,
//     applied after a newer token's write): the floor is higher by then,
//     and nothing of the write lands; after a later write of the same
//     token, the floor's stamp is at least the write's, and nothing lands
//     either;
//   - reply lost: the transaction is one raft entry, applied whole or not
//     at all; the caller gets an unknown outcome and finds the old record
//     or the new one;
//   - delivered twice: the copy is applied after the request itself, which
//     put the floor with the same stamp, so the copy is refused and
//     nothing lands (or by a newer token's floor).
func (s *Store) fencedWrite(ctx context.Context, what, key string, token fence.Token, op clientv3.Op) error {
	ctx, w := s.tel.Op(what).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	err := s.write(ctx, what, key, token, op)
	w.End(err)
	return err
}

// write is fencedWrite's transaction, sent again while a write of the same
// token stamped at least as high turns it back. The Store's own writes of
// key wait their turn, so that they do not turn each other back.
func (s *Store) write(ctx context.Context, what, key string, token fence.Token, op clientv3.Op) error {
	leave, err := s.writing.enter(ctx, key)
	if err != nil {
		return fmt.Errorf("etcdfence: %s %q: %w while the Store's writes of the key before it were under way; nothing sent", what, key, err)
	}
	defer leave()
	floor := s.FloorKey(key)
	for range fence.UpdateAttempts {
		stamp := s.stamp()
		resp, err := s.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(floor), ">", floorValue(token, stamp-1))).
			Then(clientv3.OpGet(floor)).
			Else(clientv3.OpPut(floor, floorValue(token, stamp)), op).
			Commit()
		if err != nil {
			return writeError(what, key, token, err)
		}
		s.saw(resp.Header)
		if !resp.Succeeded {
			return nil
		}
		if err := s.sameTokenSince(key, token, resp); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("etcdfence: %s %q: a write of token %d stamped past this one moved the floor, and %w before this write was sent again; nothing written", what, key, token, err)
		}
	}
	return fmt.Errorf("%w: %s %q: %d writes of token %d stamped past this one moved the floor; nothing written", fence.ErrConflict, what, key, fence.UpdateAttempts, token)
}

// sameTokenSince reads the floor that refused a write of token: nil when
// it is a floor of token itself, put by a write stamped at least as high
// (the Store then stamps its next write above it), else the refusal.
func (s *Store) sameTokenSince(key string, token fence.Token, resp *clientv3.TxnResponse) error {
	if len(resp.Responses) == 1 {
		if f := firstKV(resp, 0); f != nil {
			if tok, stamp, ok := parseFloor(f.Value); ok && tok == token {
				s.sawStamp(stamp)
				return nil
			}
		}
	}
	return refusal(key, token, resp)
}

// refusal reads the floor from a refused write's reply.
func refusal(key string, token fence.Token, resp *clientv3.TxnResponse) error {
	if len(resp.Responses) != 1 || firstKV(resp, 0) == nil {
		// A refusal always finds the floor it compared; this is no etcd.
		return fmt.Errorf("etcdfence: %q: the write was refused, and the reply has no floor", key)
	}
	return staleError(key, token, firstKV(resp, 0))
}

// staleError is the refusal of token by floor, a floor key read above it.
func staleError(key string, token fence.Token, floor *mvccpb.KeyValue) error {
	current, ok := floorToken(floor)
	if !ok {
		return fmt.Errorf("%w: floor of %q: %q (refused; nothing changed)", ErrCorrupt, key, floor.Value)
	}
	return &fence.StaleError{Resource: key, Token: token, Current: current}
}
