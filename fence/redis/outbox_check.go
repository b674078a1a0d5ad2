package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence/outbox"
)

var _ outbox.Checker = (*Outbox)(nil)

// checkScript is Check's: KEYS floors, pending, parked, reasons, effects,
// delivered. It asks Redis (redis.acl_check_cmd, Redis 7.0 and later)
// whether the user may run each command a dispatcher runs on them, and
// replies {1}, or {0, "COMMAND KEY"} for the first it may not. It writes
// nothing. On a server without acl_check_cmd it replies {1}: running the
// script at all showed that the user may run scripts on the keys.
var checkScript = newScript(`
if not redis.acl_check_cmd then return {1} end
local checks = {
  {'zrangebyscore', KEYS[2], '-inf', '+inf'}, {'zrangebyscore', KEYS[3], '-inf', '+inf'},
  {'hmget', KEYS[5], 'k'}, {'hmget', KEYS[4], 'k'},
  {'hget', KEYS[1], 'k'}, {'hset', KEYS[1], 'k', 'v'},
  {'hexists', KEYS[5], 'k'}, {'sadd', KEYS[6], 'k'},
  {'zrem', KEYS[2], 'k'}, {'zrem', KEYS[3], 'k'}, {'hdel', KEYS[4], 'k'}, {'hdel', KEYS[5], 'k'},
  {'zscore', KEYS[2], 'k'}, {'zadd', KEYS[3], '1', 'k'}, {'hset', KEYS[4], 'k', 'v'},
}
for _, c in ipairs(checks) do
  if not redis.acl_check_cmd(unpack(c)) then return {0, string.upper(c[1]) .. ' ' .. c[2]} end
end
return {1}
`)

// Check returns an error matching [outbox.ErrNotPermitted] unless the
// client's user may run what a dispatcher runs on the outbox's keys
// ([outbox.Checker]): EVALSHA (and EVAL) on them, and, as Redis 7's ACL
// check tells it, each command its reads and its Settle script run. The
// error says which command, or carries Redis's NOPERM reply. It writes
// nothing. scope is checked, and otherwise not used: ACLs grant keys,
// not resources. Other failures are returned as they are, for the
// dispatcher to retry. ctx bounds the request.
func (o *Outbox) Check(ctx context.Context, scope outbox.Scope) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := scope.Validate(); err != nil {
		return err
	}
	keys := []string{o.key(keyFloors), o.key(keyPending), o.key(keyParked), o.key(keyReasons), o.key(keyEffects), o.key(keyDelivered)}
	reply, err := checkScript.runKeys(ctx, o.store.c, keys)
	if err != nil {
		return notPermitted(fmt.Errorf("redisfence: checking the ACL under %q: %w", o.prefix, err))
	}
	if status(reply) != replyOK {
		what, _ := str(reply, 1)
		return fmt.Errorf("%w: redisfence: the user may not run %s (Redis's ACL)", outbox.ErrNotPermitted, what)
	}
	return nil
}

// notPermitted wraps err so that it matches [outbox.ErrNotPermitted] when
// Redis refused the command, or a command of a script, for the user's
// ACL (a NOPERM reply), and returns it as it is otherwise: a wrong
// password (WRONGPASS) or a missing login (NOAUTH) is no missing grant.
func notPermitted(err error) error {
	if redis.HasErrorPrefix(err, "NOPERM") || isScriptNoPerm(err) {
		return fmt.Errorf("%w: %w", outbox.ErrNotPermitted, err)
	}
	return err
}

// isScriptNoPerm reports whether err is a script's error reply for a
// command or key the ACL refused inside it: Redis 7.0 gives "ERR The user
// executing the script can't run this command or subcommand" (or "can't
// access at least one of the keys"), later versions a NOPERM within.
func isScriptNoPerm(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "ERR The user executing the script can't") ||
		strings.HasPrefix(msg, "ERR") && strings.Contains(msg, "NOPERM")
}
