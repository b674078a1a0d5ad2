package etcdfence

import (
	"context"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// opUpdateAll is the operation telemetry names UpdateAll.
const opUpdateAll = "update_all"

// MaxUpdateAllKeys is the most keys one [Store.UpdateAll] takes: its write
// compares two keys of etcd's per resource, and etcd refuses a transaction
// of more than 128 operations of a kind (its --max-txn-ops default).
const MaxUpdateAllKeys = 64

// UpdateHeld is [Store.UpdateAll] over h.Claims(): one claim per resource
// h holds, such as an *etcdlock.MultiLock's locks, each with its own token
// (see [fence.UpdateHeld]). A nil h (a typed nil too) is refused with an
// error matching [fence.ErrInvalidArgument] before any I/O, and an h that
// knows its locks are lost or past their validity with
// [fence.ErrLockLost], nothing sent ([fence.HeldClaims]).
func (s *Store) UpdateHeld(ctx context.Context, h fence.Claimer, fn fence.UpdateAllFunc) error {
	claims, err := fence.HeldClaims(h)
	if err != nil {
		return err
	}
	return s.UpdateAll(ctx, claims, fn)
}

// UpdateAll is [Store.Update] over several keys, each claimed with its own
// token, written all or nothing (see [fence.AllUpdater]): a transfer
// between two accounts. It claims every key and reads its record, in one
// read-only transaction when every floor is its token already, and
// otherwise a second that raises the lower floors and reads the records
// in one raft entry, if no floor changed since the first. A higher floor
// on any key refuses the call with a *[fence.StaleError] naming the first
// such key (in the order of [fence.SortClaims]), before fn runs and with
// no floor raised.
//
// It calls fn with the records (the zero Record for a key with no value)
// and writes fn's values with their keys' tokens in one transaction,
// which lands only if no key's floor and no key's record changed since
// the read:
//
//	If(ModRevision(floor₁) = read's, ModRevision(data₁) = read's, …)  Then(Put(data₁, record₁), …)  Else(Get(floor₁), …)
//
// (A floor the claim raised has the claim's revision.) An unchanged floor
// is still the token it was at the read; every Put and Delete writes the
// floor again, so a Delete with the same token, which leaves a data key
// absent (mod revision 0, as before a create), still changes the floor's,
// and a copy of a write that created the keys does not bring them back.
// Two compares a key keep [MaxUpdateAllKeys] within etcd's limit. A key
// fn leaves out keeps its record, and is compared all the same. On
// a change by a writer with the same token, UpdateAll reads again and
// calls fn again, up to [fence.UpdateAttempts] times in all, then returns
// an error matching [fence.ErrConflict]; a higher floor at the write gives
// a *[fence.StaleError] naming that key, and nothing of fn's lands.
//
// fn's error is returned as it is, and a panic in fn is passed on; nothing
// is written either way, though the claims stay. UpdateAll refuses before
// any I/O what [fence.CheckUpdateAll] refuses (no claims, a key claimed
// with two tokens, an empty key, a token that is not positive, a nil fn,
// a nil or ended ctx), more than [MaxUpdateAllKeys] keys, and
// ([ErrValueTooLarge]) values that make one request larger than
// [WithMaxRequestBytes].
//
// When the reply of the raise or of the write is lost, the error is a
// *[fence.UnknownOutcomeError] (Resource lists the keys, Token is the
// first one's) matching [fence.ErrUnknownOutcome]: the keys hold the
// records read or fn's, all of them, once. A copy of the write that
// arrives late or twice lands only if every record is still the one read,
// so it never applies over a newer write, and never twice. The write
// waits for the Store's other writes of its keys under way, as
// [Store.Update]'s does. ctx bounds the whole call.
func (s *Store) UpdateAll(ctx context.Context, claims []fence.Claim, fn fence.UpdateAllFunc) error {
	if s == nil || s.kv == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	return fence.RunUpdateAll(ctx, (*rounds)(s), claims, fn)
}

// CheckUpdateAll refuses, before any I/O, more than MaxUpdateAllKeys keys.
func (r *rounds) CheckUpdateAll(set []fence.Claim) error {
	if len(set) > MaxUpdateAllKeys {
		return fmt.Errorf("%w: UpdateAll of %d keys, more than MaxUpdateAllKeys (%d)", ErrInvalidArgument, len(set), MaxUpdateAllKeys)
	}
	return nil
}

// StartUpdateAll starts an UpdateAll's span.
func (r *rounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// ClaimReadAll claims every key of set and reads their records; a floor
// that changed between its read and its raise is [fence.ErrChanged].
func (r *rounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, claimedAll, error) {
	c, ok, err := (*Store)(r).claimAll(ctx, set)
	if !ok && err == nil {
		return nil, claimedAll{}, fence.ErrChanged
	}
	return c.old, c, err
}

// WriteAllIf writes next with set's tokens if every floor and every
// record is still the one c read.
func (r *rounds) WriteAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte) error {
	s := (*Store)(r)
	if err := s.checkSizeAll(set, next); err != nil {
		return err
	}
	ok, err := s.writeAllIf(ctx, set, c, next)
	if !ok && err == nil {
		return fence.ErrChanged
	}
	return err
}

// checkSizeAll refuses, before any I/O, a write of next whose request
// would be larger than etcd takes.
func (s *Store) checkSizeAll(set []fence.Claim, next map[string][]byte) error {
	est := requestFraming
	for _, c := range set {
		est += len(next[c.Resource]) + 3*len(s.FloorKey(c.Resource)) + 2*len(s.DataKey(c.Resource)) + 2*TokenDigits + keyFraming
	}
	if est > s.opts.maxRequestBytes {
		return fmt.Errorf("%w: UpdateAll of %q makes a request of about %d bytes, over the limit of %d (WithMaxRequestBytes)",
			ErrValueTooLarge, fence.ClaimsLabel(set), est, s.opts.maxRequestBytes)
	}
	return nil
}

// writeAllIf writes next with set's tokens if every floor's and every data
// key's mod revision is the one c read.
func (s *Store) writeAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte) (bool, error) {
	leave, err := s.turns(ctx, opUpdateAll, slices.Collect(maps.Keys(next))...)
	if err != nil {
		return false, err
	}
	defer leave()
	cmps := make([]clientv3.Cmp, 0, 2*len(set))
	var puts []clientv3.Op
	gets := make([]clientv3.Op, 0, len(set))
	for i, cl := range set {
		floor, data := s.FloorKey(cl.Resource), s.DataKey(cl.Resource)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(floor), "=", c.floorRevs[i]), clientv3.Compare(clientv3.ModRevision(data), "=", c.revs[i]))
		if v, ok := next[cl.Resource]; ok {
			puts = append(puts, clientv3.OpPut(floor, padToken(cl.Token)), clientv3.OpPut(data, encodeRecord(cl.Token, v)))
		}
		gets = append(gets, clientv3.OpGet(floor))
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return false, writeError(opUpdateAll, fence.ClaimsLabel(set), set[0].Token, err)
	}
	s.saw(resp.Header)
	if resp.Succeeded {
		for _, cl := range set {
			if _, ok := next[cl.Resource]; ok {
				s.floors.set(cl.Resource, cl.Token)
			}
		}
		return true, nil
	}
	// Refused: by a higher floor, or by a changed record, which the next
	// attempt reads.
	return false, staleAmong(set, resp, 0)
}

// staleAmong returns the refusal of the first claim of set whose floor,
// read by the transaction's operations from first on (one Get per claim),
// is above its token, or nil if none is.
func staleAmong(set []fence.Claim, resp *clientv3.TxnResponse, first int) error {
	for i, c := range set {
		if f := firstKV(resp, first+i); f != nil && string(f.Value) > padToken(c.Token) {
			return staleError(c.Resource, c.Token, f)
		}
	}
	return nil
}
