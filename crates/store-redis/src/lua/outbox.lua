-- outbox: one call on the notification outbox of one actor's slot (see
-- outbox_prelude.lua). KEYS[1] = the slot's outbox key; ARGV[1] = the call,
-- ARGV[2] = the slot prefix, then:
--   'schedule' id, body, due        -> {'added'} or {'known'}
--   'claim' now, until, limit, horizon
--       Forgets the events finished at or before horizon, then claims up to
--       limit events claimable at now, in the order they became claimable
--       then were recorded, each as its next attempt until `until`.
--       -> {'claimed', {{id, attempt, body, claimable at}...}, next}
--          with next the earliest claimable time left ('' when none)
--   'finish' id, attempt, now       -> {'done'} or {'not_held'}
--   'retry' id, attempt, at         -> {'done'} or {'not_held'}
--   'head'                          -> {'head', next}
-- An event entry that does not read answers {'corrupt', reason, id}.
local call, slot = ARGV[1], ARGV[2]
local outbox, events, done = outbox_keys(slot)
if KEYS[1] ~= outbox then
  return redis.error_reply('ERR countersign: the key is not the outbox of the slot')
end

-- The earliest claimable time left, '' when nothing waits.
local function next_claimable()
  local head = redis.call('ZRANGE', outbox, 0, 0, 'WITHSCORES')
  return head[2] or ''
end

-- The entry of event id: {'ok', entry}, {'missing'} or {'corrupt', reason}.
local function entry_of(id)
  local raw = redis.call('HGET', events, id)
  if not raw then return 'missing' end
  local ok, e = pcall(cjson.decode, raw)
  if not ok or type(e) ~= 'table' or type(e.m) ~= 'string' or type(e.a) ~= 'number'
      or type(e.b) ~= 'string' or string.sub(e.m, 22) ~= id then
    return 'corrupt', 'notification entry does not read'
  end
  return 'ok', e
end

-- The entry of a claim (id, attempt), when that claim is its latest.
local function held(id, attempt)
  local status, e = entry_of(id)
  if status ~= 'ok' then return status, e end
  if tostring(e.a) ~= attempt then return 'missing' end
  return 'ok', e
end

if call == 'schedule' then
  if not is_u64(ARGV[5]) then
    return redis.error_reply('ERR countersign: due is not a decimal integer')
  end
  if outbox_add(slot, ARGV[3], ARGV[4], ARGV[5]) then return {'added'} end
  return {'known'}
elseif call == 'claim' then
  local now, untl, limit, horizon = ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
  if not (is_u64(now) and is_u64(untl) and is_u64(horizon)) or limit == nil or limit < 1 then
    return redis.error_reply('ERR countersign: bad claim arguments')
  end
  redis.call('ZREMRANGEBYSCORE', done, '-inf', horizon)
  local due = redis.call('ZRANGEBYSCORE', outbox, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  local claimed = {}
  for i = 1, #due, 2 do
    local member, was = due[i], due[i + 1]
    local id = string.sub(member, 22)
    local status, e = entry_of(id)
    if status ~= 'ok' then return {'corrupt', e or 'notification entry is missing', id} end
    e.a = e.a + 1
    redis.call('HSET', events, id, cjson.encode(e))
    redis.call('ZADD', outbox, untl, member)
    claimed[#claimed + 1] = {id, tostring(e.a), e.b, was}
  end
  return {'claimed', claimed, next_claimable()}
elseif call == 'finish' or call == 'retry' then
  local id, attempt, at = ARGV[3], ARGV[4], ARGV[5]
  if not is_u64(at) then return redis.error_reply('ERR countersign: the time is not a decimal integer') end
  local status, e = held(id, attempt)
  if status == 'corrupt' then return {'corrupt', e, id} end
  if status ~= 'ok' then return {'not_held'} end
  if call == 'finish' then
    redis.call('ZREM', outbox, e.m)
    redis.call('HDEL', events, id)
    redis.call('ZADD', done, at, id)
  else
    redis.call('ZADD', outbox, at, e.m)
  end
  return {'done'}
elseif call == 'head' then
  return {'head', next_claimable()}
end
return redis.error_reply('ERR countersign: unknown outbox call')
