-- abandon: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = caller's now (ms),
-- ARGV[3] = attempt id, ARGV[4] = retention ms, ARGV[5] = the slot prefix.
-- Rules of decide_abandon, in its order; replies with the outcome, the
-- record as it was before the call, and what the script saw. A grant whose
-- run or actor was stopped answers 'stopped' and nothing is written.
local key, slot = KEYS[1], ARGV[5]
local now, attempt = ARGV[2], ARGV[3]
local err = check_key(key, slot, ARGV[1])
if err then return err end
local status, f, flat = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
if not is_token(attempt) then return redis.error_reply('ERR countersign: attempt is not an attempt id') end
local retention = tonumber(ARGV[4])
local fs, stopped, fkey = is_stopped(slot, f)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
if stopped then return {'stopped', flat, meta(stopped)} end
if f.state == 'revoked' or f.state == 'locked' then return {'revoked', flat, meta(stopped)} end
local mine = f.state == 'consumed' and f.consumed_by == attempt
local list = abandoned_list(f)
local known = contains(list, attempt)
local base = math.max(ms(f.expires_at), ms(now))
if not known and #list >= MAX_ABANDONED then
  if f.state == 'consumed' and not mine then return {'consumed_by_other', flat, meta(stopped)} end
  redis.call('HDEL', key, 'consumed_at', 'consumed_by')
  redis.call('HSET', key, 'state', 'revoked')
  redis.call('ZREM', live_key(slot, f.run), ARGV[1])
  local moved = keep_grant(slot, key, f, base, retention)
  return {'retired', flat, meta(stopped, moved)}
end
if not known then
  list[#list + 1] = attempt
  redis.call('HSET', key, 'abandoned', table.concat(list, ' '))
end
if mine then
  redis.call('HDEL', key, 'consumed_at', 'consumed_by')
  redis.call('HSET', key, 'state', 'active')
  -- Usable again: back in its run's live set, for a stop to count.
  redis.call('ZADD', live_key(slot, f.run), f.expires_at, ARGV[1])
  redis.call('SADD', runs_key(slot), f.run)
end
if known and not mine then
  -- Nothing changes; the expiry is rewritten so that a WAIT after this
  -- call also covers the first abandon.
  redis.call('HSET', key, 'abandoned', f.abandoned)
end
local moved = keep_grant(slot, key, f, base, retention)
if f.state == 'consumed' and not mine then return {'consumed_by_other', flat, meta(stopped, moved)} end
if uint_ge(now, f.expires_at) then return {'expired', flat, meta(stopped, moved)} end
if mine then return {'restored', flat, meta(stopped, moved)} end
return {'usable', flat, meta(stopped, moved)}
