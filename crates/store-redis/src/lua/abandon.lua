-- abandon: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = caller's now (ms),
-- ARGV[3] = attempt id, ARGV[4] = retention ms, ARGV[5] = the slot prefix.
-- Rules of decide_abandon, in its order; replies with the outcome, the
-- record as it was before the call, and what the script saw. A grant whose
-- run or actor was stopped answers 'stopped' and nothing is written.
local key, slot = KEYS[1], ARGV[5]
local now, attempt = ARGV[2], ARGV[3]
local err = check_key(key, slot, ARGV[1])
if err then return err end
local status, f = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
if not is_token(attempt) then return redis.error_reply('ERR countersign: attempt is not an attempt id') end
local retention = tonumber(ARGV[4])
local fs, stopped, fkey = is_stopped(slot, f)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local before = f.raw
if stopped then return {'stopped', before, meta(stopped)} end
if f.state == REVOKED or f.state == LOCKED then return {'revoked', before, meta(stopped)} end
local mine = f.state == CONSUMED and f.consumed_by == attempt
local list = abandoned_list(f)
local known = contains(list, attempt)
local base = math.max(ms(f.expires_at), ms(now))
if not known and #list >= MAX_ABANDONED then
  if f.state == CONSUMED and not mine then return {'consumed_by_other', before, meta(stopped)} end
  local moved = save(slot, key, f, base, retention, false, REVOKED, f.failed, nil, nil,
    f.abandoned)
  redis.call('ZREM', live_key(slot, f.run), member_of(ARGV[1]))
  return {'retired', before, meta(stopped, moved)}
end
local state, consumed_at, consumed_by, abandoned = f.state, f.consumed_at, f.consumed_by, f.abandoned
if not known then
  list[#list + 1] = attempt
  abandoned = table.concat(list, ' ')
end
if mine then
  state, consumed_at, consumed_by = ACTIVE, nil, nil
  -- Usable again: back in its run's live set, for a stop to count.
  redis.call('ZADD', live_key(slot, f.run), f.expires_at, member_of(ARGV[1]))
  redis.call('SADD', runs_key(slot), f.run)
end
-- Written also when nothing changes (a repeated abandon), so that a WAIT
-- after this call also covers the first abandon. The keys beside it are
-- always kept: a restore may have just created the live set or run set.
local moved = save(slot, key, f, base, retention, true, state, f.failed, consumed_at,
  consumed_by, abandoned)
if f.state == CONSUMED and not mine then return {'consumed_by_other', before, meta(stopped, moved)} end
if uint_ge(now, f.expires_at) then return {'expired', before, meta(stopped, moved)} end
if mine then return {'restored', before, meta(stopped, moved)} end
return {'usable', before, meta(stopped, moved)}
