/**
 * The Lua scripts of the Redis store: one script per atomic change, each saying what it
 * guarantees (BullMQ's habit). Redis runs a script alone, start to end, so each is atomic: no other
 * client sees it half done, and two racing scripts on one conversation run one after the other.
 * Time is Redis's own (`TIME`), never the caller's.
 *
 * Keys, under P (ARGV[1]): the store's prefix followed by `|`, which no prefix contains, so two
 * stores with nested prefixes never share a key:
 *   P c:<id>                 hash: the checkpoint (orchestrator, status, seq, dispatchCount,
 *                            state, result, suspendedAt), the lease (owner, epoch,
 *                            leaseExpiresAt) and updatedAt; times in epoch ms of Redis's clock.
 *                            On an incremental commit `state` is the base (a whole checkpoint or
 *                            a snapshot) and `baseSeq` its seq; absent, the base is at `seq`
 *   P e:<id>                 list: the entries after the base (seqs baseSeq + 1 .. seq), in order;
 *                            absent when the base is whole
 *   P ids, P s:<status>, P o:<orch>, P os:<orch>:<status>
 *                            sorted sets of ids (score 0: ordered bytewise, paged with ZRANGEBYLEX)
 *   P orchestrators          set of orchestrator names seen
 *   P suspendedAt:<orch>     sorted set id -> suspendedAt (the oldest suspension)
 *   P ended                  sorted set id -> when it ended (retention)
 * The scripts build index keys from the prefix, so on Redis Cluster give a prefix with a hash tag
 * (`{co}:`) to keep every key in one slot.
 *
 * Optional values (result, suspendedAt) travel as '' when absent and '=' .. value when present.
 */

const COMMON = `
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(n) return string.format('%d', n) end
local function opt(v) if v == '' then return nil end return string.sub(v, 2) end
local function index_status(id, orch, status, suspended_at, now)
  redis.call('ZADD', P .. 's:' .. status, 0, id)
  redis.call('ZADD', P .. 'os:' .. orch .. ':' .. status, 0, id)
  if status == 'suspended' then
    redis.call('ZADD', P .. 'suspendedAt:' .. orch, suspended_at or now, id)
  elseif status == 'ended' then
    redis.call('ZADD', P .. 'ended', now, id)
  end
end
local function unindex_status(id, orch, status)
  redis.call('ZREM', P .. 's:' .. status, id)
  redis.call('ZREM', P .. 'os:' .. orch .. ':' .. status, id)
  if status == 'suspended' then redis.call('ZREM', P .. 'suspendedAt:' .. orch, id) end
  if status == 'ended' then redis.call('ZREM', P .. 'ended', id) end
end
local function remove(key, id)
  local h = redis.call('HMGET', key, 'orchestrator', 'status')
  if not h[1] then return 0 end
  redis.call('DEL', key, P .. 'e:' .. id)
  redis.call('ZREM', P .. 'ids', id)
  redis.call('ZREM', P .. 'o:' .. h[1], id)
  unindex_status(id, h[1], h[2])
  return 1
end
local CHECKPOINT = {'orchestrator', 'status', 'seq', 'dispatchCount', 'state', 'result', 'suspendedAt'}
-- The compare-and-set of commit and append: the hash's seq, owner, epoch, status, orchestrator
-- and baseSeq when the stored lease is (owner, epoch) and the stored seq is seq - 1; else nil
-- and the refusal to answer.
local function writable(key, owner, epoch, seq)
  local h = redis.call('HMGET', key, 'seq', 'owner', 'epoch', 'status', 'orchestrator', 'baseSeq')
  if not h[1] then return nil, {'not_found'} end
  if h[2] ~= owner or tonumber(h[3]) ~= tonumber(epoch) then return nil, {'fenced', h[1]} end
  if tonumber(h[1]) ~= tonumber(seq) - 1 then return nil, {'sequence', h[1]} end
  return h
end
`;

/**
 * create: KEYS[1] the conversation's hash; ARGV prefix, id, orchestrator, status, seq,
 * dispatchCount, state, result, suspendedAt, owner, leaseMs.
 * Guarantees: the conversation is written with its first checkpoint and the caller's lease
 * (epoch 1; released at once unless the status is running) only if no conversation has this id; of two racing creates exactly one writes.
 * Answers the lease's expiry, or nil when the id was taken (nothing changed).
 */
export const CREATE = `${COMMON}
local key, id = KEYS[1], ARGV[2]
if redis.call('EXISTS', key) == 1 then return false end
local now = now_ms()
local expires = now + tonumber(ARGV[11])
local orch, status = ARGV[3], ARGV[4]
redis.call('HSET', key, 'orchestrator', orch, 'status', status, 'seq', ARGV[5],
  'dispatchCount', ARGV[6], 'state', ARGV[7], 'epoch', 1, 'updatedAt', int(now))
if status == 'running' then
  redis.call('HSET', key, 'owner', ARGV[10], 'leaseExpiresAt', int(expires))
else
  expires = now
end
local result, suspended_at = opt(ARGV[8]), opt(ARGV[9])
if result then redis.call('HSET', key, 'result', result) end
if suspended_at then redis.call('HSET', key, 'suspendedAt', suspended_at) end
redis.call('ZADD', P .. 'ids', 0, id)
redis.call('ZADD', P .. 'o:' .. orch, 0, id)
redis.call('SADD', P .. 'orchestrators', orch)
index_status(id, orch, status, tonumber(suspended_at), now)
return int(expires)
`;

/**
 * acquire: KEYS[1] the hash, KEYS[2] its entries; ARGV prefix, id, owner, leaseMs, deadOwner ('' for none).
 * Guarantees: the lease goes to the caller (epoch + 1, expiry TIME + leaseMs) only when no live
 * lease holds the conversation: none recorded, expired by Redis's clock, held by the caller
 * itself, or held by deadOwner (a holder the caller knows is gone). Of racing acquires exactly one
 * takes it. An ended conversation is never leased. Nothing changes otherwise.
 * Answers {'not_found'} | {'held', owner, expiresAt} | {'ended', checkpoint...} |
 * {'acquired', previousOwner or nil, epoch, expiresAt, checkpoint..., baseSeq or nil, entries}
 * (the entries after the base, read in the same script as the lease is taken: no append between).
 */
export const ACQUIRE = `${COMMON}
local key = KEYS[1]
local lease = redis.call('HMGET', key, 'owner', 'leaseExpiresAt', 'epoch')
local cp = redis.call('HMGET', key, unpack(CHECKPOINT))
if not cp[1] then return {'not_found'} end
if cp[2] == 'ended' then return {'ended', cp[1], cp[2], cp[3], cp[4], cp[5], cp[6], cp[7]} end
local now = now_ms()
local owner, expires_at = lease[1], tonumber(lease[2])
if owner and expires_at and expires_at > now and owner ~= ARGV[3] and owner ~= ARGV[5] then
  return {'held', owner, lease[2]}
end
local epoch = tonumber(lease[3]) + 1
local expires = now + tonumber(ARGV[4])
redis.call('HSET', key, 'owner', ARGV[3], 'epoch', int(epoch), 'leaseExpiresAt', int(expires))
local base = redis.call('HGET', key, 'baseSeq')
local entries = {}
if base then entries = redis.call('LRANGE', KEYS[2], 0, -1) end
return {'acquired', owner, int(epoch), int(expires), cp[1], cp[2], cp[3], cp[4], cp[5], cp[6], cp[7],
  base, entries}
`;

/**
 * commit: KEYS[1] the hash, KEYS[2] its entries; ARGV prefix, id, status, seq, dispatchCount,
 * state, result, suspendedAt, owner, epoch, leaseMs.
 * Guarantees (compare-and-set): the checkpoint is replaced whole only when the stored lease is the
 * caller's (owner and epoch) and the stored seq is the new seq - 1; then the entries are deleted
 * (it is the base), the lease is renewed to TIME + leaseMs while running and released otherwise,
 * and the status indexes follow. A refusal changes nothing and says why.
 * Answers {'ok', expiresAt} | {'fenced', storedSeq} | {'sequence', storedSeq} | {'not_found'}.
 */
export const COMMIT = `${COMMON}
local key, id = KEYS[1], ARGV[2]
local h, refused = writable(key, ARGV[9], ARGV[10], ARGV[4])
if refused then return refused end
if h[6] then redis.call('DEL', KEYS[2]); redis.call('HDEL', key, 'baseSeq') end
local now = now_ms()
local status, old_status, orch = ARGV[3], h[4], h[5]
local result, suspended_at = opt(ARGV[7]), opt(ARGV[8])
local expires = now + tonumber(ARGV[11])
-- One HSET for the common commit (running to running, nothing optional).
local fields = {'status', status, 'seq', ARGV[4], 'dispatchCount', ARGV[5], 'state', ARGV[6],
  'updatedAt', int(now)}
if status == 'running' then
  fields[#fields + 1] = 'leaseExpiresAt'
  fields[#fields + 1] = int(expires)
end
if result then
  fields[#fields + 1] = 'result'
  fields[#fields + 1] = result
end
if suspended_at then
  fields[#fields + 1] = 'suspendedAt'
  fields[#fields + 1] = suspended_at
end
redis.call('HSET', key, unpack(fields))
if status ~= 'running' or old_status ~= 'running' then
  if not result then redis.call('HDEL', key, 'result') end
  if not suspended_at then redis.call('HDEL', key, 'suspendedAt') end
end
if status ~= old_status or status == 'suspended' then
  unindex_status(id, orch, old_status)
  index_status(id, orch, status, tonumber(suspended_at), now)
end
if status == 'running' then return {'ok', int(expires)} end
redis.call('HDEL', key, 'owner', 'leaseExpiresAt')
return {'ok', int(now)}
`;

/**
 * append: KEYS[1] the hash, KEYS[2] its entries; ARGV prefix, id, seq, dispatchCount, entry,
 * owner, epoch, leaseMs.
 * Guarantees (the compare-and-set of commit): only when the stored lease is the caller's and the
 * stored seq is seq - 1, the entry is pushed on the list and the hash takes the seq, the count,
 * the lease renewed to TIME + leaseMs and the status running (a suspended conversation's first
 * append after its resume); the base stays, `baseSeq` remembering where it is. A refusal changes
 * nothing and says why.
 * Answers {'ok', expiresAt} | {'fenced', storedSeq} | {'sequence', storedSeq} | {'not_found'}.
 */
export const APPEND = `${COMMON}
local key, id = KEYS[1], ARGV[2]
local h, refused = writable(key, ARGV[6], ARGV[7], ARGV[3])
if refused then return refused end
local now = now_ms()
local expires = now + tonumber(ARGV[8])
redis.call('RPUSH', KEYS[2], ARGV[5])
redis.call('HSET', key, 'seq', ARGV[3], 'dispatchCount', ARGV[4], 'updatedAt', int(now),
  'leaseExpiresAt', int(expires), 'baseSeq', h[6] or h[1])
if h[4] ~= 'running' then
  redis.call('HSET', key, 'status', 'running')
  redis.call('HDEL', key, 'result', 'suspendedAt')
  unindex_status(id, h[5], h[4])
  index_status(id, h[5], 'running', nil, now)
end
return {'ok', int(expires)}
`;

/**
 * snapshot: KEYS[1] the hash, KEYS[2] its entries; ARGV prefix, id, seq, state, owner, epoch.
 * Guarantees: only when the stored lease is the caller's (owner and epoch), the conversation is
 * running and seq is after the base's and at most the stored seq, `state` becomes the base at seq
 * and the entries up to seq leave the list (LTRIM; the list and `baseSeq` go when seq is the
 * stored one); the seq, count, status and lease do not change. A refusal changes nothing.
 * Answers {'ok', compacted} | {'fenced'} | {'stale'} | {'not_found'}.
 */
export const SNAPSHOT = `${COMMON}
local key = KEYS[1]
local h = redis.call('HMGET', key, 'seq', 'owner', 'epoch', 'status', 'baseSeq')
if not h[1] then return {'not_found'} end
if h[2] ~= ARGV[5] or tonumber(h[3]) ~= tonumber(ARGV[6]) then return {'fenced'} end
local seq, at = tonumber(h[1]), tonumber(ARGV[3])
local base = tonumber(h[5] or h[1])
if h[4] ~= 'running' or at <= base or at > seq then return {'stale'} end
redis.call('HSET', key, 'state', ARGV[4])
if at == seq then
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', key, 'baseSeq')
else
  redis.call('LTRIM', KEYS[2], at - base, -1)
  redis.call('HSET', key, 'baseSeq', ARGV[3])
end
return {'ok', at - base}
`;

/**
 * renew: KEYS[1] the hash; ARGV prefix, id, owner, epoch, leaseMs.
 * Guarantees: the lease's expiry becomes TIME + leaseMs only while the stored lease is the
 * caller's and the conversation is running. Answers the new expiry, or nil (nothing changed).
 */
export const RENEW = `${COMMON}
local key = KEYS[1]
local h = redis.call('HMGET', key, 'owner', 'epoch', 'status')
if h[1] ~= ARGV[3] or tonumber(h[2]) ~= tonumber(ARGV[4]) or h[3] ~= 'running' then return false end
local expires = now_ms() + tonumber(ARGV[5])
redis.call('HSET', key, 'leaseExpiresAt', int(expires))
return int(expires)
`;

/**
 * release: KEYS[1] the hash; ARGV prefix, id, owner, epoch.
 * Guarantees: the lease is dropped only while it is the caller's; the checkpoint stays as stored.
 * Answers 1 when released, 0 otherwise.
 */
export const RELEASE = `${COMMON}
local key = KEYS[1]
local h = redis.call('HMGET', key, 'owner', 'epoch')
if h[1] ~= ARGV[3] or tonumber(h[2]) ~= tonumber(ARGV[4]) then return 0 end
redis.call('HDEL', key, 'owner', 'leaseExpiresAt')
return 1
`;

/**
 * get: KEYS[1] the hash; ARGV prefix, id. A read: the summary fields and Redis's clock, together (so
 * a lease is shown live or not by the same clock that expires it).
 */
export const GET = `${COMMON}
local h = redis.call('HMGET', KEYS[1], 'orchestrator', 'status', 'seq', 'dispatchCount', 'result',
  'suspendedAt', 'owner', 'leaseExpiresAt', 'updatedAt')
return {int(now_ms()), h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]}
`;

/**
 * delete: KEYS[1] the hash; ARGV prefix, id.
 * Guarantees: the conversation, its entries and every index entry of it go together. Answers 1
 * or 0.
 */
export const DELETE = `${COMMON}
return remove(KEYS[1], ARGV[2])
`;

/**
 * purge: ARGV prefix, retentionMs, batch.
 * Guarantees: deletes (with their index entries) at most `batch` conversations that ended at
 * least retentionMs ago by Redis's clock, oldest first. Answers how many.
 */
export const PURGE = `${COMMON}
local ids = redis.call('ZRANGEBYSCORE', P .. 'ended', '-inf', now_ms() - tonumber(ARGV[2]),
  'LIMIT', 0, tonumber(ARGV[3]))
local n = 0
for _, id in ipairs(ids) do
  if remove(P .. 'c:' .. id, id) == 0 then redis.call('ZREM', P .. 'ended', id) end
  n = n + 1
end
return n
`;
