package redisholder

import "github.com/redis/go-redis/v9"

// issueScript issues a token while, and only while, the lock is ours:
// KEYS[1] is the lock's key, KEYS[2] the counter, ARGV[1] the lock's
// value (redislock's token and metadata). It returns {token, pttl}, or
// nil when the key holds another value or none. One script, so that no
// other client's command comes between the check and the INCR: a client
// whose lock expired cannot be issued a token above a newer holder's.
var issueScript = redis.NewScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then return false end
return {redis.call("incr", KEYS[2]), redis.call("pttl", KEYS[1])}
`)

// uncheckedScript is issueScript without the check: the control of the
// tests (WithUncheckedIssueForTest), never used otherwise.
var uncheckedScript = redis.NewScript(`
return {redis.call("incr", KEYS[2]), redis.call("pttl", KEYS[1])}
`)
