package redisfence

// replyDuplicate is the recording script's reply for an effect recorded
// already: {3, its key}.
const replyDuplicate = 3

// recordScript is an Outbox's write: KEYS the records' hashes, then the
// outbox's seq, pending, effects and delivered keys. For KEYS[i], from a = 4i-3,
// ARGV[a] its token, ARGV[a+1] the version read, ARGV[a+2] "1" to write
// ARGV[a+3] or "0" to keep the record, as updateAllScript's; then the
// wake channel, then for each effect its key, its encoding and its
// resource. It checks every record as updateAllScript does (lib's check:
// {0, i, floor} stale, {2} changed), then that no effect is recorded, pending,
// parked or delivered ({3, key}),
// and only then writes the records and the effects, at the positions
// after the last handed out, and publishes each effect's resource.
var recordScript = newScript(`
local nk = #KEYS - 4
local seqk, pend, effs, done = KEYS[nk + 1], KEYS[nk + 2], KEYS[nk + 3], KEYS[nk + 4]
local refused, ns = check(nk)
if refused then return refused end
local e0 = 4 * nk + 1
local ne = (#ARGV - e0) / 3
for j = 1, ne do
  local k = ARGV[e0 + 3 * j - 2]
  if redis.call('HEXISTS', effs, k) == 1 or redis.call('SISMEMBER', done, k) == 1 then return {3, k} end
end
write(nk, ns)
if ne > 0 then
  local last = redis.call('INCRBY', seqk, ne)
  for j = 1, ne do
    local b = e0 + 3 * j - 2
    redis.call('ZADD', pend, last - ne + j, ARGV[b])
    redis.call('HSET', effs, ARGV[b], ARGV[b + 1])
    redis.call('PUBLISH', ARGV[e0], ARGV[b + 2])
  end
end
return {1}
`)

// settleScript is Settle's: KEYS floors, pending, parked, reasons,
// effects, delivered; ARGV[1] the dispatcher's resource, ARGV[2] its
// token, then for each effect its key, "0" (delivered) or "1" (parked),
// and its marker. A higher floor refuses it all ({0, floor}); otherwise
// it raises the floor, replaces each delivered effect that is still
// recorded by its key in the delivered set, and moves the parked ones
// that are still pending to the parked set, at their positions.
var settleScript = newScript(`
local f = redis.call('HGET', KEYS[1], ARGV[1])
if f then
  if not valid(f) then return {-1, 'floor ' .. f} end
  if less(ARGV[2], f) then return {0, f} end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
for j = 3, #ARGV, 3 do
  local k = ARGV[j]
  if ARGV[j + 1] == '0' then
    if redis.call('HEXISTS', KEYS[5], k) == 1 then redis.call('SADD', KEYS[6], k) end
    redis.call('ZREM', KEYS[2], k)
    redis.call('ZREM', KEYS[3], k)
    redis.call('HDEL', KEYS[4], k)
    redis.call('HDEL', KEYS[5], k)
  else
    local s = redis.call('ZSCORE', KEYS[2], k)
    if s then
      redis.call('ZREM', KEYS[2], k)
      redis.call('ZADD', KEYS[3], s, k)
      redis.call('HSET', KEYS[4], k, ARGV[j + 2])
    end
  end
end
return {1}
`)

// requeueScript is Requeue's: KEYS pending, parked, reasons; ARGV[1] the
// effect's key, ARGV[2] the wake channel, ARGV[3] its resource. It moves
// a parked effect back to the pending set at its position ({1}), or
// replies {0} when it is not parked.
var requeueScript = newScript(`
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s then return {0} end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], s, ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return {1}
`)
