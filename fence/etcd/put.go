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

// keyFraming is the allowance, in bytes, for the protobuf framing of the
// operations an UpdateAll or an Outbox write has for each key (two
// compares, the puts of the floor and the record, the refusal's Get): a
// tag and a length for each operation, its request and each of its
// fields, about 40 bytes with a value of 16 KiB or more (measured with
// proto.Size; TestUpdateAllSizeEstimateAtLimit).
const keyFraming = 64

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
// write find the floor put since the last revision this Store saw; it is
// then sent again, at most [fence.UpdateAttempts] times in all, and then
// fails with an error matching [fence.ErrConflict], nothing written.
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
	est := size + 6*len(s.FloorKey(key)) + len(s.DataKey(key)) + 3*TokenDigits + requestFraming
	if est > s.opts.maxRequestBytes {
		return fmt.Errorf("%w: a %d-byte value under %q makes a request of about %d bytes, over the limit of %d (WithMaxRequestBytes)",
			ErrValueTooLarge, size, key, est, s.opts.maxRequestBytes)
	}
	return nil
}

// fencedWrite sends the transaction of a write whose data operation is op,
// in one of two flat forms, seen being the last revision the Store saw:
//
//	first:  If(Value(floor) > token-1)  Then(Get(floor))
//	        Else(Put(floor, token), op)
//	again:  If(Value(floor) < token+"\x00", ModRevision(floor) < seen+1)
//	        Then(Put(floor, token), op)  Else(Get(floor))
//
// The first form lands on a floor of a lower token, or on none (etcd fails
// every Value compare on a missing key, so a key never written takes the
// Else branch and is written, as the contract's first write must be): it
// is the write of a holder that has not written key with its token yet.
// The second lands on a floor of token itself, or of a lower one, put at
// or before the last revision the Store saw: the repeated writes of a
// holder. Each refuses a higher token; the first also refuses any floor
// of token, and the second one put after seen. The Store sends the form it
// expects to land (the second when its last write or claim of key was
// with token), and when a floor of token or of a lower one refused it,
// the other form, or the second again with the reply's newer revision, up
// to [fence.UpdateAttempts] transactions in all. The refusal reads the
// floor, so that it says what the write was refused against. Tokens are
// stored zero-padded to [TokenDigits] digits, so the byte-wise compare is
// the numeric one. etcd has no ≤ and no ≥ compare: token+"\x00" is the
// least value above token, so the second form's compare is Value(floor)
// ≤ token exactly, and a corrupt floor of token followed by more bytes
// ("0000000000000000002 ") refuses it, and gives [ErrCorrupt], as it does
// the first form (token+"0" let the bytes below '0' through, and the write
// overwrote such a floor: TestCorruptFloorTokenPrefixSecondForm).
//
// The second form's compare of the floor's mod revision keeps a holder's
// writes in the order it made them. Every write puts the floor, so a copy
// of a write delivered twice, or a write that arrives late after a later
// write of the same token landed (by this Store or any other: the later
// write landed after the late one was sent, past any revision its Store
// had seen), finds the floor put past its seen, or a floor of its token
// against the first form, and changes nothing: without that, the copy
// would replace the later write, as tokens equal to the floor are not
// fenced against each other. A nested transaction would do both in one
// form (If(floor > token) Else(Txn(If(floor = token, ModRevision(floor) >
// seen) …))), at about 10 % more a write (BenchmarkPutShapes).
//
// Delivery faults are safe because etcd evaluates the compares when it
// applies the entry, against the floor as it is then:
//
//   - late (a paused holder's request, or one its caller gave up on,
//     applied after a newer token's write): the floor is higher by then,
//     and nothing of the write lands; after a later write of the same
//     token, the first form finds a floor of its token, the second one put
//     past its seen, and nothing lands either;
//   - reply lost: the transaction is one raft entry, applied whole or not
//     at all; the caller gets an unknown outcome and finds the old record
//     or the new one;
//   - delivered twice: the copy is applied after the request itself, which
//     put a floor of its token past seen, so nothing of it lands (or it
//     finds a newer token's floor).
func (s *Store) fencedWrite(ctx context.Context, what, key string, token fence.Token, op clientv3.Op) error {
	ctx, w := s.tel.Op(what).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	err := s.write(ctx, what, key, token, op)
	w.End(err)
	return err
}

// write is fencedWrite's transaction, sent in the form the Store expects
// to land, and again while a floor of token or of a lower one turns it
// back. The Store's own writes of key wait their turn, so that they do
// not turn each other back.
func (s *Store) write(ctx context.Context, what, key string, token fence.Token, op clientv3.Op) error {
	leave, err := s.turns(ctx, what, key)
	if err != nil {
		return err
	}
	defer leave()
	floor, tok := s.FloorKey(key), padToken(token)
	again := s.floors.is(key, token)
	for range fence.UpdateAttempts {
		var resp *clientv3.TxnResponse
		if again {
			resp, err = s.kv.Txn(ctx).
				If(clientv3.Compare(clientv3.Value(floor), "<", tok+"\x00"), clientv3.Compare(clientv3.ModRevision(floor), "<", s.seen.Load()+1)).
				Then(clientv3.OpPut(floor, tok), op).
				Else(clientv3.OpGet(floor)).
				Commit()
		} else {
			resp, err = s.kv.Txn(ctx).
				If(clientv3.Compare(clientv3.Value(floor), ">", padToken(token-1))).
				Then(clientv3.OpGet(floor)).
				Else(clientv3.OpPut(floor, tok), op).
				Commit()
		}
		if err != nil {
			s.floors.forget(key)
			return writeError(what, key, token, err)
		}
		s.saw(resp.Header)
		if resp.Succeeded == again {
			s.floors.set(key, token)
			return nil
		}
		// Refused: by a higher token, or (sent again) by a floor of token
		// or of a lower one, none, or one of token put past seen.
		f := firstKV(resp, 0)
		if f != nil {
			cur, ok := parseToken(string(f.Value))
			if !ok || cur > token {
				s.floors.forget(key)
				return staleError(key, token, f)
			}
			again = cur == token
		} else {
			again = false
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("etcdfence: %s %q: the floor was not as expected (a write of token %d the Store had not seen, or a lower one), and %w before this write was sent again; nothing written", what, key, token, err)
		}
	}
	s.floors.forget(key)
	return fmt.Errorf("%w: %s %q: %d transactions found the floor moved by writes of token %d the Store had not seen; nothing written", fence.ErrConflict, what, key, fence.UpdateAttempts, token)
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
	current, ok := parseToken(string(floor.Value))
	if !ok {
		return fmt.Errorf("%w: floor of %q: %q (refused; nothing changed)", ErrCorrupt, key, floor.Value)
	}
	return &fence.StaleError{Resource: key, Token: token, Current: current}
}
