package redisfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// opUpdateAll is the operation telemetry names UpdateAll.
const opUpdateAll = "update_all"

// MaxUpdateAllKeys is the most keys one [Store.UpdateAll] takes.
const MaxUpdateAllKeys = 1000

// claimAllScript is an UpdateAll's read: KEYS the hashes, ARGV[i] the
// token of KEYS[i]. It checks every key first, and refuses them all for
// one with a higher floor ({0, i, floor}); then it raises every floor
// below its token and returns {1, then token, value, version of each}. A
// hash with no floor field is fenced by its token, but its floor field is
// written all the same (the write checks the field itself), as
// claimScript's is.
var claimAllScript = newScript(`
local out, low = {1}, {}
for i = 1, #KEYS do
  local f, t, v, n = unpack(redis.call('HMGET', KEYS[i], 'floor', 'token', 'value', 'version'))
  local stored = f
  if not f and t and t ~= '' then f = t end
  if f then
    if not valid(f) then return {-1, i, 'floor ' .. f} end
    if less(ARGV[i], f) then return {0, i, f} end
  end
  if t and t ~= '' and not valid(t) then return {-1, i, 'token ' .. t} end
  if not num(n) then return {-1, i, 'version not a number'} end
  if stored ~= ARGV[i] then low[#low + 1] = i end
  out[#out + 1] = t
  out[#out + 1] = v
  out[#out + 1] = n or '0'
end
for _, i in ipairs(low) do redis.call('HSET', KEYS[i], 'floor', ARGV[i]) end
return out
`)

// updateAllScript is an UpdateAll's write: KEYS the hashes; for KEYS[i],
// from a = 4i-3, ARGV[a] its token, ARGV[a+1] the version read, ARGV[a+2]
// "1" to write ARGV[a+3] or "0" to keep the record. It checks every key
// first: a higher floor refuses the write ({0, i, floor}); a floor that
// is not the token, or a version that is not the one read, on any key,
// makes it {2}, changed. Only then does it write, all the keys.
var updateAllScript = newScript(`
local refused, ns = check(#KEYS)
if refused then return refused end
write(#KEYS, ns)
return {1}
`)

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
// between two accounts. The keys' hashes must fall in one hash slot
// ([Slot]: give them one hash tag, "acct:{42}:a" and "acct:{42}:b"), since
// one script touches them all; keys in different slots are refused with
// [ErrCrossSlot] before any I/O, on a cluster or not.
//
// One script claims every key and reads its record: a higher floor on any
// key refuses them all, with a *[fence.StaleError] naming the first such
// key (in the order of [fence.SortClaims]), before fn runs and with no
// floor raised. UpdateAll calls fn with the records (the zero Record for
// a key with no value) and writes fn's values in a second script, which
// checks every key before it writes any: it lands only if every floor is
// its token and no key's version changed since the read. A key fn leaves
// out keeps its record, and is checked all the same. On a change by a
// writer with the same token, UpdateAll reads again and calls fn again,
// up to [fence.UpdateAttempts] times in all, then returns an error
// matching [fence.ErrConflict]; a higher floor at the write gives a
// *[fence.StaleError] naming that key, and nothing of fn's lands.
//
// fn's error is returned as it is, and a panic in fn is passed on;
// nothing is written either way, though the claims stay. UpdateAll
// refuses before any I/O what [fence.CheckUpdateAll] refuses (no claims,
// a key claimed with two tokens, an empty key, a token that is not
// positive, a nil fn, a nil or ended ctx), more than [MaxUpdateAllKeys]
// keys, and keys of two slots. Each script is sent once, whatever the
// client's MaxRetries: a reply that is lost gives a
// *[fence.UnknownOutcomeError] (Resource lists the keys, Token is the
// first one's) matching [fence.ErrUnknownOutcome], and the keys hold the
// records read or fn's, all of them, once. A copy of the write that ran
// late would land only if every version were still the one read, so it
// never applies over a newer write, nor twice. ctx bounds the whole call.
func (s *Store) UpdateAll(ctx context.Context, claims []fence.Claim, fn fence.UpdateAllFunc) error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	return fence.RunUpdateAll(ctx, (*rounds)(s), claims, fn)
}

// CheckUpdateAll refuses, before any I/O, more than MaxUpdateAllKeys keys
// and keys of two slots.
func (r *rounds) CheckUpdateAll(set []fence.Claim) error {
	if len(set) > MaxUpdateAllKeys {
		return fmt.Errorf("%w: UpdateAll of %d keys, more than MaxUpdateAllKeys (%d)", ErrInvalidArgument, len(set), MaxUpdateAllKeys)
	}
	first := (*Store)(r).Key(set[0].Resource)
	for _, c := range set[1:] {
		if k := (*Store)(r).Key(c.Resource); Slot(k) != Slot(first) {
			return fmt.Errorf("%w: %q (slot %d) and %q (slot %d): give them one hash tag, such as {%s}",
				ErrCrossSlot, first, Slot(first), k, Slot(k), set[0].Resource)
		}
	}
	return nil
}

// StartUpdateAll starts an UpdateAll's span.
func (r *rounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// claimedAll is what an UpdateAll's claim read: the hashes' versions,
// which its write compares, and the keys it named them by.
type claimedAll struct {
	keys     []string
	versions []string
}

// ClaimReadAll is the claim script over every key of set.
func (r *rounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, claimedAll, error) {
	s := (*Store)(r)
	keys := make([]string, len(set))
	for i, c := range set {
		keys[i] = s.Key(c.Resource)
	}
	old, versions, err := s.claimAll(ctx, set, keys)
	return old, claimedAll{keys: keys, versions: versions}, err
}

// WriteAllIf is the write script: it writes next only if every floor is
// its token and every version the one read.
func (r *rounds) WriteAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte) error {
	args := make([]any, 0, 4*len(set))
	for i, cl := range set {
		v, ok := next[cl.Resource]
		args = append(args, padToken(cl.Token), c.versions[i], flag(ok), v)
	}
	reply, err := updateAllScript.runKeys(ctx, r.c, c.keys, args...)
	if err == nil && status(reply) == replyChanged {
		return fence.ErrChanged
	}
	return allResult(set, reply, err)
}

// flag is the script's word for whether a key is written.
func flag(write bool) string {
	if write {
		return "1"
	}
	return "0"
}

// claimAll claims every key of set and reads their records and versions.
func (s *Store) claimAll(ctx context.Context, set []fence.Claim, keys []string) (map[string]fence.Record, []string, error) {
	args := make([]any, len(set))
	for i, c := range set {
		args[i] = padToken(c.Token)
	}
	reply, err := claimAllScript.runKeys(ctx, s.c, keys, args...)
	if err := allResult(set, reply, err); err != nil {
		return nil, nil, err
	}
	old := make(map[string]fence.Record, len(set))
	versions := make([]string, len(set))
	for i, c := range set {
		rec, err := record(c.Resource, reply, 1+3*i, 2+3*i)
		if err != nil && !errors.Is(err, fence.ErrNotFound) {
			return nil, nil, err
		}
		if err == nil {
			rec.Token = c.Token
		}
		old[c.Resource] = rec
		versions[i], _ = str(reply, 3+3*i)
	}
	return old, versions, nil
}

// allResult is the error of an UpdateAll script's reply, or of its
// sending, as [result] is of a one-key script's: a refusal and a key not
// in the format name the key by the index the reply gives.
func allResult(set []fence.Claim, reply []any, err error) error {
	if err != nil {
		return writeError(opUpdateAll, fence.ClaimsLabel(set), set[0].Token, err)
	}
	st := status(reply)
	if st == replyOK {
		return nil
	}
	i, _ := reply[min(1, len(reply)-1)].(int64)
	if i < 1 || int(i) > len(set) {
		return fmt.Errorf("redisfence: UpdateAll of %q: unexpected script reply %v", fence.ClaimsLabel(set), reply)
	}
	c := set[i-1]
	if st == replyStale {
		return staleOf(c.Resource, c.Token, reply[1:])
	}
	return malformed(c.Resource, reply[1:])
}

var _ fence.AllUpdater = (*Store)(nil)
