package redisfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// claimScript is GetForUpdate's and an Update's read: KEYS[1] the hash,
// ARGV[1] the token. It raises the floor to the token, unless it is
// higher, and returns {1, token, value, version} as the hash held them. A
// hash with no floor field is fenced by its token, as Put's is, but the
// floor field is written whenever it is not the token (absent too): the
// write checks the field itself.
var claimScript = newScript(`
local f, t, v, n = unpack(redis.call('HMGET', KEYS[1], 'floor', 'token', 'value', 'version'))
local stored = f
if not f and t and t ~= '' then f = t end
if f then
  if not valid(f) then return {-1, 'floor ' .. f} end
  if less(ARGV[1], f) then return {0, f} end
end
if t and t ~= '' and not valid(t) then return {-1, 'token ' .. t} end
if not num(n) then return {-1, 'version not a number'} end
if stored ~= ARGV[1] then redis.call('HSET', KEYS[1], 'floor', ARGV[1]) end
return {1, t, v, n or '0'}
`)

// updateScript is an Update's write: KEYS[1] the hash, ARGV[1] the token,
// ARGV[2] the version read, ARGV[3] the value. It writes only if the floor
// is the token and the version is the one read.
var updateScript = newScript(`
local f, n = unpack(redis.call('HMGET', KEYS[1], 'floor', 'version'))
if not f then return {2} end
if not valid(f) then return {-1, 'floor ' .. f} end
if less(ARGV[1], f) then return {0, f} end
if f ~= ARGV[1] or (n or '0') ~= ARGV[2] then return {2} end
if not num(n) then return {-1, 'version not a number'} end
n = tonumber(n or '0')
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[3], 'version', n + 1)
return {1}
`)

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): unless Redis holds a higher token for key, the floor
// is token when the record is read, in one script, so from then on every
// write with a lower token is refused. The record is the one key held at
// that point, with token as its Token. A key with no value is claimed
// too, and the error matches [fence.ErrNotFound]. A higher floor refuses
// the claim with a *[fence.StaleError] (Current is the floor) and changes
// nothing.
//
// Errors are those of [Store.Put]: a reply that is lost gives
// [fence.ErrUnknownOutcome], since the floor may have been raised. A claim
// that arrives late raises the floor only if it is lower, which the caller
// asked for. ctx bounds the request.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, w := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	c, err := s.claim(ctx, key, token)
	if errors.Is(err, fence.ErrNotFound) {
		w.End(nil) // it claimed the key all the same
	} else {
		w.End(err)
	}
	return c.rec, err
}

// claimed is what a claim read: the record, and the version of the hash,
// which an Update's write compares.
type claimed struct {
	rec     fence.Record
	version string
}

func (s *Store) claim(ctx context.Context, key string, token fence.Token) (claimed, error) {
	reply, err := claimScript.run(ctx, s.c, s.Key(key), padToken(token))
	if err := result(opGetForUpdate, key, token, reply, err); err != nil {
		return claimed{}, err
	}
	version, _ := str(reply, 3)
	rec, err := record(key, reply, 1, 2)
	if errors.Is(err, fence.ErrNotFound) {
		return claimed{version: version}, fmt.Errorf("%w (claimed with token %d)", err, token)
	}
	if err != nil {
		return claimed{}, err
	}
	rec.Token = token
	return claimed{rec: rec, version: version}, nil
}

// Update is a read-modify-write of key with token (see [fence.Updater]):
// it claims key and reads its record as [Store.GetForUpdate] does, calls
// fn with it (the zero Record when key holds no value), and writes fn's
// result with token in a second script that lands only if the floor is
// still token and the hash's version is the one read. An older holder's
// late write is refused by that floor, and one with the same token changes
// the version. On such a change Update reads again and calls fn again, up
// to [fence.UpdateAttempts] times in all, then returns an error matching
// [fence.ErrConflict]. A higher floor, at the read or at the write, gives a
// *[fence.StaleError]; at the read, fn is not called.
//
// fn's error is returned as it is, and a panic in fn is passed on: nothing
// is written either way, though the claim stays. Update refuses an empty
// key, a token that is not positive, a nil fn and a nil or ended ctx
// before any I/O. When a script's reply is lost, the error matches
// [fence.ErrUnknownOutcome]: the key holds the record read or fn's, once;
// read it back before deciding. The write is sent once, and a copy that
// arrived late would land only if the version were still the one read, so
// fn's result is never applied over a newer write, nor twice. ctx bounds
// the whole call.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
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

// ClaimRead is the claim script; the version it read is what the write
// compares.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, string, error) {
	c, err := (*Store)(r).claim(ctx, key, token)
	return c.rec, c.version, err
}

// WriteIf is the update script: it writes v only if the floor is token
// and the version the one read.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, version string, v []byte) error {
	s := (*Store)(r)
	reply, err := updateScript.run(ctx, s.c, s.Key(key), padToken(token), version, v)
	if err == nil && status(reply) == replyChanged {
		return fence.ErrChanged
	}
	return result(opUpdate, key, token, reply, err)
}
