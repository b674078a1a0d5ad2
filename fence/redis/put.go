package redisfence

import (
	"context"

	"github.com/fencelock/fencelock/fence"
)

// putScript is Put's and Delete's: KEYS[1] the hash, ARGV[1] the token,
// ARGV[2] "put" or "delete", ARGV[3] the value. It checks everything
// before its one write command. A delete empties the token and the value
// (a tombstone) rather than removing them, in the same one HSET. A hash
// with no floor (written by something else) is fenced by its token.
var putScript = newScript(`
local f, n, t = unpack(redis.call('HMGET', KEYS[1], 'floor', 'version', 'token'))
if not f and t and t ~= '' then f = t end
if f then
  if not valid(f) then return {-1, 'floor ' .. f} end
  if less(ARGV[1], f) then return {0, f} end
end
if not num(n) then return {-1, 'version not a number'} end
n = tonumber(n or '0')
if ARGV[2] == 'delete' then
  redis.call('HSET', KEYS[1], 'floor', ARGV[1], 'token', '', 'value', '', 'version', n + 1)
else
  redis.call('HSET', KEYS[1], 'floor', ARGV[1], 'token', ARGV[1], 'value', ARGV[3], 'version', n + 1)
end
return {1}
`)

// Put stores value under key with token, unless Redis holds a higher
// token for key: then it returns a *[fence.StaleError] (matching
// [fence.ErrStale], with the floor as Current) and changes nothing. A
// token equal to the floor is accepted. The check and the write are one
// script, which Redis runs atomically.
//
// Put returns an error matching [fence.ErrInvalidKey] or
// [fence.ErrInvalidToken] before any I/O. When Redis gives no answer (the
// connection broke after the script was sent, the context ended, a read
// timeout) the error is a *[fence.UnknownOutcomeError] matching
// [fence.ErrUnknownOutcome], with the client's error as its cause: the
// key then holds the old record or the new one, whole. The script is sent
// once, whatever the client's MaxRetries: a resent copy of a write that
// had landed would be refused after a newer token's write, and say stale
// of a write that landed. An error reply of Redis's is a refusal, and
// nothing was written ([ErrCorrupt] for a key of another type or
// format). ctx bounds the request.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return s.write(ctx, opPut, key, token, value)
}

// Delete removes the record under key, fenced like [Store.Put]: unless
// Redis holds a higher token for key, it empties the record (a tombstone)
// and raises the floor to token, in one script and one HSET. The floor stays in the hash: [Store.Get]
// then reports [fence.ErrNotFound], a later Put with a lower token is
// refused with [fence.ErrStale], and one with a token at least as high
// writes the key again. Results, errors and the role of ctx are those of
// Put.
//
// Deleting the hash by other means (DEL, an EXPIRE, eviction under a
// maxmemory policy other than noeviction) removes the floor: the next Put
// lands whatever its token, as on a new key. Keep the Store's prefix out
// of eviction (maxmemory-policy noeviction or volatile-*).
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return s.write(ctx, opDelete, key, token, nil)
}

// write runs putScript for a put or a delete.
func (s *Store) write(ctx context.Context, what, key string, token fence.Token, value []byte) error {
	ctx, w := s.tel.Op(what).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	err := s.runPut(ctx, what, key, token, value)
	w.End(err)
	return err
}

func (s *Store) runPut(ctx context.Context, what, key string, token fence.Token, value []byte) error {
	reply, err := putScript.run(ctx, s.c, s.Key(key), padToken(token), what, value)
	return result(what, key, token, reply, err)
}
