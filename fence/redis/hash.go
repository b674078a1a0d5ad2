package redisfence

import (
	"context"

	"fmt"
	"maps"
	"slices"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
)

// MaxFields is the most fields one call of a [Hash] reads or writes: each
// is an argument of a script, and Lua passes them on the C stack.
const MaxFields = 1000

// Hash fences writes to fields of your own Redis hashes: each hash keeps,
// in a field you name (the token field), the highest token that has
// written or claimed it, and every write is one script that compares it
// and writes, so Redis refuses a stale token atomically. The other fields
// are yours, in your key names and your format: a Hash only writes the
// fields you give it, and the token field.
//
//	accounts, err := redisfence.NewHash(rdb, "fence")
//	err = accounts.Set(ctx, "account:42", token, map[string]string{"owner": "ada"})
//
// The token field holds the token as [TokenDigits] decimal digits
// ("0000000000000000042"). Writers that do not go through a Hash are not
// fenced, but an [Hash.Update] notices them: its write compares the fields
// it read.
//
// A Hash holds no state beyond its configuration and is safe for
// concurrent use. The zero Hash is not usable; create one with [NewHash].
type Hash struct {
	c     Client
	field string
	tel   *tel.Recorder
}

// NewHash returns a Hash that keeps each hash's token in tokenField,
// through c. It does no I/O. It fails, before any I/O, for a nil client (a
// typed nil too) or an empty tokenField ([ErrInvalidArgument]), or an
// invalid option ([ErrInvalidOption]).
func NewHash(c Client, tokenField string, opts ...Option) (*Hash, error) {
	if nilcheck.IsNil(c) {
		return nil, fmt.Errorf("%w: NewHash: nil client (%T)", ErrInvalidArgument, c)
	}
	if err := checkClient(c); err != nil {
		return nil, err
	}
	if tokenField == "" {
		return nil, fmt.Errorf("%w: NewHash: empty token field", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("redis", instrumentationName, o.meters, o.tracers, opHashSet, opHashGetForUpdate, opHashUpdate)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Hash{c: c, field: tokenField, tel: r}, nil
}

// TokenField returns the name of the field that holds each hash's token
// ("" for a nil Hash).
func (h *Hash) TokenField() string {
	if h == nil {
		return ""
	}
	return h.field
}

// hashSetScript is Set's: KEYS[1] the hash, ARGV[1] the token field,
// ARGV[2] the token, then field, value pairs.
var hashSetScript = newScript(`
local f = redis.call('HGET', KEYS[1], ARGV[1])
if f then
  if not valid(f) then return {-1, 'token field ' .. ARGV[1] .. ' holds ' .. f} end
  if less(ARGV[2], f) then return {0, f} end
end
local args = {ARGV[1], ARGV[2]}
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(args))
return {1}
`)

// hashClaimScript is GetForUpdate's and an Update's read: KEYS[1] the
// hash, ARGV[1] the token field, ARGV[2] the token, then the fields to
// read. It returns {1, value or nil, ...}.
var hashClaimScript = newScript(`
local f = redis.call('HGET', KEYS[1], ARGV[1])
if f then
  if not valid(f) then return {-1, 'token field ' .. ARGV[1] .. ' holds ' .. f} end
  if less(ARGV[2], f) then return {0, f} end
end
if f ~= ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local out = {1}
for i = 3, #ARGV do out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i]) end
return out
`)

// hashUpdateScript is an Update's write: KEYS[1] the hash, ARGV[1] the
// token field, ARGV[2] the token, ARGV[3] the number n of fields read,
// then n triples (field, "1" and its value, or "0" and "" for a field that
// was not there), then the field, value pairs to write. It writes only if
// the token field holds the token and every field read is as it was.
var hashUpdateScript = newScript(`
local f = redis.call('HGET', KEYS[1], ARGV[1])
if not f then return {2} end
if not valid(f) then return {-1, 'token field ' .. ARGV[1] .. ' holds ' .. f} end
if less(ARGV[2], f) then return {0, f} end
if f ~= ARGV[2] then return {2} end
local i = 4
for k = 1, tonumber(ARGV[3]) do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if ARGV[i + 1] == '1' then
    if cur ~= ARGV[i + 2] then return {2} end
  elseif cur then
    return {2}
  end
  i = i + 3
end
local args = {}
for j = i, #ARGV do args[#args + 1] = ARGV[j] end
if #args > 0 then redis.call('HSET', KEYS[1], unpack(args)) end
return {1}
`)

// Set writes fields to the hash key with token, and token to its token
// field, unless the token field holds a higher token: then it returns a
// *[fence.StaleError] (Current is that token) and changes nothing. One
// script: Redis checks and writes atomically. A hash that does not exist
// is created.
//
// Set refuses, before any I/O, an empty key ([fence.ErrInvalidKey]), a
// token that is not positive ([fence.ErrInvalidToken]), no fields, more
// than [MaxFields], or a field named like the token field
// ([ErrInvalidArgument]). A key that is not a hash, or whose token field
// holds something else than a token, gives [ErrCorrupt] and changes
// nothing. The errors for a lost reply and for Redis's refusals are those
// of [Store.Put]; the script is sent once. ctx bounds the request.
func (h *Hash) Set(ctx context.Context, key string, token fence.Token, fields map[string]string) error {
	if err := h.check(ctx, key, token, len(fields), slices.Collect(maps.Keys(fields))); err != nil {
		return err
	}
	if len(fields) == 0 {
		return fmt.Errorf("%w: Hash.Set %q: no fields", ErrInvalidArgument, key)
	}
	ctx, w := h.tel.Op(opHashSet).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	args := []any{h.field, padToken(token)}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		args = append(args, f, fields[f])
	}
	reply, err := hashSetScript.run(ctx, h.c, key, args...)
	err = result(opHashSet, key, token, reply, err)
	w.End(err)
	return err
}

// GetForUpdate reads fields of the hash key, claiming it for token:
// unless the token field holds a higher token, it holds token when the
// fields are read, in one script, so from then on a Set or Update with a
// lower token is refused. The map has the fields that are there (none, for
// a hash that does not exist: the claim creates it with its token field).
// A higher token refuses the claim with a *[fence.StaleError] and changes
// nothing. Arguments and errors are those of [Hash.Set], but no fields is
// allowed: a claim alone.
func (h *Hash) GetForUpdate(ctx context.Context, key string, token fence.Token, fields ...string) (map[string]string, error) {
	if err := h.check(ctx, key, token, len(fields), fields); err != nil {
		return nil, err
	}
	ctx, w := h.tel.Op(opHashGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	m, err := h.claim(ctx, key, token, fields)
	w.End(err)
	return m, err
}

func (h *Hash) claim(ctx context.Context, key string, token fence.Token, fields []string) (map[string]string, error) {
	args := make([]any, 0, 2+len(fields))
	args = append(args, h.field, padToken(token))
	for _, f := range fields {
		args = append(args, f)
	}
	reply, err := hashClaimScript.run(ctx, h.c, key, args...)
	if err := result(opHashGetForUpdate, key, token, reply, err); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(fields))
	for i, f := range fields {
		if v, ok := str(reply, 1+i); ok {
			m[f] = v
		}
	}
	return m, nil
}

// Update is a read-modify-write of fields of the hash key with token: it
// claims key and reads fields as [Hash.GetForUpdate] does, calls fn with
// what it read, and writes the fields fn returns in a second script that
// lands only if the token field still holds token and every field read is
// as it was (there with the same value, or still not there). fn may return
// fields it did not read, and need not return those it read; it returns
// no field to write nothing.
//
// On a change, by a writer with the same token or one that writes the hash
// without a Hash, Update reads again and calls fn again, up to
// [fence.UpdateAttempts] times in all, then returns an error matching
// [fence.ErrConflict]. A higher token, at the read or at the write, gives a
// *[fence.StaleError]; at the read, fn is not called. fn's error is
// returned as it is and a panic in fn is passed on, with nothing written.
// Arguments and errors are otherwise those of [Hash.Set]; fn's fields are
// checked as Set's. ctx bounds the whole call.
func (h *Hash) Update(ctx context.Context, key string, token fence.Token, fields []string, fn func(old map[string]string) (map[string]string, error)) error {
	if err := h.check(ctx, key, token, len(fields), fields); err != nil {
		return err
	}
	r := &hashRounds{h: h, fields: slices.Compact(slices.Sorted(slices.Values(fields)))}
	return fence.RunUpdateOf[map[string]string](ctx, r, key, token, fn)
}

// hashRounds is a Hash's [fence.UpdateRoundsOf] for one Update: its
// fields, sorted, are what each round reads and compares.
type hashRounds struct {
	h      *Hash
	fields []string
}

// StartUpdate starts an Update's span.
func (r *hashRounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	ctx, w := r.h.tel.Op(opHashUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	return ctx, w.UpdateSpan()
}

// ClaimRead is the claim script: fn gets a copy of the fields read, the
// write compares them.
func (r *hashRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (map[string]string, map[string]string, error) {
	old, err := r.h.claim(ctx, key, token, r.fields)
	return maps.Clone(old), old, err
}

// WriteIf checks fn's fields as Set's, then is the update script: it
// writes next only if the token field holds token and every field read
// is as it was.
func (r *hashRounds) WriteIf(ctx context.Context, key string, token fence.Token, old, next map[string]string) error {
	h, fields := r.h, r.fields
	if err := h.check(ctx, key, token, len(fields)+len(next), slices.Collect(maps.Keys(next))); err != nil {
		return err
	}
	args := make([]any, 0, 3+3*len(fields)+2*len(next))
	args = append(args, h.field, padToken(token), len(fields))
	for _, f := range fields {
		if v, ok := old[f]; ok {
			args = append(args, f, "1", v)
		} else {
			args = append(args, f, "0", "")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(next)) {
		args = append(args, f, next[f])
	}
	reply, err := hashUpdateScript.run(ctx, h.c, key, args...)
	if err == nil && status(reply) == replyChanged {
		return fence.ErrChanged
	}
	return result(opHashUpdate, key, token, reply, err)
}

// check validates a call before any I/O: n is the number of fields it
// sends, and fields their names.
func (h *Hash) check(ctx context.Context, key string, token fence.Token, n int, fields []string) error {
	switch {
	case h == nil || h.c == nil:
		return fmt.Errorf("%w: a nil or zero Hash; create one with NewHash", ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	case token <= 0:
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case n > MaxFields:
		return fmt.Errorf("%w: %q: %d fields, more than MaxFields (%d)", ErrInvalidArgument, key, n, MaxFields)
	case slices.Contains(fields, h.field):
		return fmt.Errorf("%w: %q: field %q is the token field", ErrInvalidArgument, key, h.field)
	}
	return ctx.Err()
}
