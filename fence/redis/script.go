package redisfence

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
)

// Client is what a Store or a Hash sends its commands through:
// *redis.Client, *redis.ClusterClient, *redis.Ring and
// redis.UniversalClient all are one. Every script touches one key, or
// (UpdateAll) keys of one hash slot, so a cluster routes it to that slot.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// lib is the Lua every script starts with: a check of a stored token's
// format, and the order of two stored tokens. Tokens are compared digit by
// digit, since Lua's numbers are doubles (exact only up to 2^53) and its
// string order is the server's locale's. check and write are an
// UpdateAll's conditional write of the records KEYS[1..nk], shared by
// updateAllScript and the Outbox's recordScript: for KEYS[i], from
// a = 4i-3, ARGV[a] its token, ARGV[a+1] the version read, ARGV[a+2] "1"
// to write ARGV[a+3] or "0" to keep the record. check returns the
// refusal to reply with, or nil and the versions read; write writes.
const lib = `
local function valid(t)
  return #t == 19 and string.find(t, '^%d+$') ~= nil and t ~= '0000000000000000000'
end
local function num(v)
  return v == false or v == nil or string.find(v, '^%d+$') ~= nil
end
local function less(a, b)
  for i = 1, 19 do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function check(nk)
  local changed, ns = false, {}
  for i = 1, nk do
    local a = 4 * i - 3
    local f, n = unpack(redis.call('HMGET', KEYS[i], 'floor', 'version'))
    if not f then
      changed = true
    else
      if not valid(f) then return {-1, i, 'floor ' .. f} end
      if less(ARGV[a], f) then return {0, i, f} end
      if f ~= ARGV[a] or (n or '0') ~= ARGV[a + 1] then changed = true end
      if not num(n) then return {-1, i, 'version not a number'} end
    end
    ns[i] = tonumber(n or '0')
  end
  if changed then return {2} end
  return nil, ns
end
local function write(nk, ns)
  for i = 1, nk do
    local a = 4 * i - 3
    if ARGV[a + 2] == '1' then
      redis.call('HSET', KEYS[i], 'token', ARGV[a], 'value', ARGV[a + 3], 'version', ns[i] + 1)
    end
  end
end
`

// The replies of the scripts: an array whose first element says which.
const (
	replyStale     = 0  // refused by a higher floor, which is the second element
	replyOK        = 1  // done; any further elements are what was read
	replyChanged   = 2  // an Update's write: the record changed since the read
	replyMalformed = -1 // a key not in this package's format; the second element says what
)

// script is a Lua script run with EVALSHA, and with EVAL when the server
// does not have it (NOSCRIPT: a restart, a failover, SCRIPT FLUSH).
type script struct {
	src, sha string
}

func newScript(body string) *script {
	s := redis.NewScript(lib + body)
	return &script{src: lib + body, sha: s.Hash()}
}

// noRetry is a command go-redis sends once: its retries (MaxRetries,
// default 3) resend a command whose connection broke after it was written,
// so a script whose reply was lost would run twice, and the second run of
// a write that had landed, after a newer token's, would say stale. A
// command that was never written is still retried.
type noRetry struct{ *redis.Cmd }

// NoRetry implements redis.Cmder.
func (noRetry) NoRetry() bool { return !resendForTest.Load() }

// resendForTest lets go-redis resend the scripts, for the control of the
// test that shows why they are sent once (export_test.go).
var resendForTest atomic.Bool

// run runs the script on key with args, once, and returns its reply.
func (s *script) run(ctx context.Context, c Client, key string, args ...any) ([]any, error) {
	return s.runKeys(ctx, c, []string{key}, args...)
}

// runKeys runs the script on keys (of one slot, so that a cluster client
// routes it by the first) with args, once, and returns its reply.
func (s *script) runKeys(ctx context.Context, c Client, keys []string, args ...any) ([]any, error) {
	reply, err := s.send(ctx, c, "evalsha", s.sha, keys, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Refused before it ran: the server has no such script.
		reply, err = s.send(ctx, c, "eval", s.src, keys, args)
	}
	return reply, err
}

func (s *script) send(ctx context.Context, c Client, cmd, body string, keys []string, args []any) ([]any, error) {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, cmd, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	rc := noRetry{redis.NewCmd(ctx, a...)}
	if err := c.Process(ctx, rc); err != nil {
		return nil, err
	}
	v, err := rc.Slice()
	if err != nil {
		// As it is: an asynchronous client (autopipelining) gives the
		// script's error, NOSCRIPT too, here rather than from Process.
		return nil, err
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("redisfence: empty script reply")
	}
	return v, nil
}

// status returns a reply's first element.
func status(reply []any) int64 {
	n, _ := reply[0].(int64)
	return n
}

// str returns a reply's i-th element as a string, and false for a nil
// (a field that is not there).
func str(reply []any, i int) (string, bool) {
	if i >= len(reply) {
		return "", false
	}
	s, ok := reply[i].(string)
	return s, ok
}

// staleOf is the refusal of token by the floor in a reply.
func staleOf(key string, token fence.Token, reply []any) error {
	f, _ := str(reply, 1)
	current, ok := parseToken(f)
	if !ok {
		return fmt.Errorf("%w: %q: floor %q (refused; nothing changed)", ErrCorrupt, key, f)
	}
	return &fence.StaleError{Resource: key, Token: token, Current: current}
}

// malformed is the error of a reply that found key not in the package's
// format.
func malformed(key string, reply []any) error {
	what, _ := str(reply, 1)
	return fmt.Errorf("%w: %q: %s (nothing changed)", ErrCorrupt, key, what)
}

// refusals are the prefixes of the error replies Redis gives a script
// before it runs or at its first write, when nothing has been written:
// the script is missing (NOSCRIPT), the server is busy, loading, a replica
// or out of memory, the user lacks a permission, the key is elsewhere in a
// cluster, the server refuses writes. Any other error reply (a proxy's own
// error, sent after it forwarded the script) leaves the outcome unknown.
var refusals = []string{
	"NOSCRIPT", "BUSY", "LOADING", "READONLY", "OOM", "NOPERM", "NOAUTH", "WRONGPASS",
	"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "NOREPLICAS", "MISCONF",
	"EXECABORT", "ERR unknown command", "CROSSSLOT",
}

// writeError turns the error of a script that writes into the error to
// return. The scripts check everything before their one write command, so
// an error reply Redis gives before or at that write ([refusals]) wrote
// nothing, and a key of another type (WRONGTYPE, where a server puts it)
// is [ErrCorrupt]. A command that was never sent (a dial error, a pool
// timeout, a closed client) wrote nothing. Anything else (a broken
// connection, a timeout, the context ending, an error reply Redis does not
// give) may come after the script ran, and is a
// *[fence.UnknownOutcomeError]. This is the one place that rule is stated.
func writeError(what, key string, token fence.Token, err error) error {
	var re redis.Error
	var op *net.OpError
	switch {
	case errors.As(err, &re) && strings.Contains(re.Error(), "WRONGTYPE"):
		return fmt.Errorf("%w: %q is not a hash: %w (nothing changed)", ErrCorrupt, key, err)
	case errors.As(err, &re) && slices.ContainsFunc(refusals, func(p string) bool { return strings.HasPrefix(re.Error(), p) }):
		return fmt.Errorf("redisfence: %s %q: refused by Redis, nothing written: %w", what, key, err)
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return fmt.Errorf("redisfence: %s %q: not sent: %w", what, key, err)
	}
	return &fence.UnknownOutcomeError{Resource: key, Token: token, Err: err}
}

// result is the error of a script's reply, or of its sending: nil for
// done, the refusal for a higher floor, ErrCorrupt for a key not in the
// format. (An Update's "changed" reply is its caller's to read first.)
func result(what, key string, token fence.Token, reply []any, err error) error {
	if err != nil {
		return writeError(what, key, token, err)
	}
	switch status(reply) {
	case replyOK:
		return nil
	case replyStale:
		return staleOf(key, token, reply)
	}
	return malformed(key, reply)
}
