-- abandon: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = caller's now (ms),
-- ARGV[3] = attempt id, ARGV[4] = retention ms, ARGV[5] = most abandoned
-- attempts a grant keeps. Rules of decide_abandon, in its order; replies
-- with the outcome and the record as it was before the call.
local key = KEYS[1]
local now, attempt = ARGV[2], ARGV[3]
local status, f, flat = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if not is_uint(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
if not is_uint(ARGV[5]) then return redis.error_reply('ERR countersign: limit is not a decimal integer') end
local retention, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
if f.state == 'revoked' then return {'revoked', flat} end
local mine = f.state == 'consumed' and f.consumed_by == attempt
local list = abandoned_list(f)
local known = contains(list, attempt)
local keep = math.max(ms(f.expires_at), ms(now))
if not known and #list >= limit then
  if f.state == 'consumed' and not mine then return {'consumed_by_other', flat} end
  redis.call('HDEL', key, 'consumed_at', 'consumed_by')
  redis.call('HSET', key, 'state', 'revoked')
  keep_until(key, keep, retention)
  return {'retired', flat}
end
if not known then
  list[#list + 1] = attempt
  redis.call('HSET', key, 'abandoned', table.concat(list, ' '))
end
if mine then
  redis.call('HDEL', key, 'consumed_at', 'consumed_by')
  redis.call('HSET', key, 'state', 'active')
end
keep_until(key, keep, retention)
if f.state == 'consumed' and not mine then return {'consumed_by_other', flat} end
if uint_ge(now, f.expires_at) then return {'expired', flat} end
if mine then return {'restored', flat} end
return {'usable', flat}
