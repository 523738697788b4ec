-- outbox_directory: where the notification outboxes wait, in a slot of its
-- own. KEYS[1] = the due index (sorted set: actor tag -> the earliest time
-- its outbox may hold a claimable event), KEYS[2] = the actors (hash:
-- actor tag -> how many times a step told of a new event). ARGV[1] = the
-- call, then:
--   'register' tag        before a step may record an event: the actor is
--                         known, so a sweep finds its outbox even when the
--                         step's 'hint' never comes  -> {'ok'}
--   'hint' tag, due       after a step recorded an event: counted, and the
--                         actor due no later than `due` -> {'ok'}
--   'due' now, limit      the actors due at now, earliest first, each with
--                         its count -> {'due', {tag, count}...}
--   'settle' tag, count, next
--                         after a claim in the actor's slot that left its
--                         earliest claimable time `next` ('' for none):
--                         when no step told of an event since the count
--                         was read, the actor is due at next (or not at
--                         all); otherwise no later than next -> {'ok'}
--   'actors' cursor       one page of the known actors
--                         -> {'actors', cursor, {tag...}}
-- A step's 'hint' comes after its event is recorded, and moves the count,
-- so a claim that missed the event never settles the actor past it.
local call = ARGV[1]

-- Due no later than at.
local function due_by(tag, at)
  local score = redis.call('ZSCORE', KEYS[1], tag)
  if not score or tonumber(score) > tonumber(at) then
    redis.call('ZADD', KEYS[1], at, tag)
  end
end

if call == 'register' then
  redis.call('HSETNX', KEYS[2], ARGV[2], '0')
  return {'ok'}
elseif call == 'hint' then
  if not is_u64(ARGV[3]) then return redis.error_reply('ERR countersign: due is not a decimal integer') end
  redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
  due_by(ARGV[2], ARGV[3])
  return {'ok'}
elseif call == 'due' then
  local limit = tonumber(ARGV[3])
  if not is_u64(ARGV[2]) or limit == nil or limit < 1 then
    return redis.error_reply('ERR countersign: bad due arguments')
  end
  local tags = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, limit)
  local due = {}
  for _, tag in ipairs(tags) do
    due[#due + 1] = {tag, redis.call('HGET', KEYS[2], tag) or '0'}
  end
  return {'due', due}
elseif call == 'settle' then
  local tag, seen, nxt = ARGV[2], ARGV[3], ARGV[4]
  if nxt ~= '' and tonumber(nxt) == nil then
    return redis.error_reply('ERR countersign: next is not a number')
  end
  local count = redis.call('HGET', KEYS[2], tag) or '0'
  if count == seen then
    if nxt == '' then
      redis.call('ZREM', KEYS[1], tag)
    else
      redis.call('ZADD', KEYS[1], nxt, tag)
    end
  elseif nxt ~= '' then
    due_by(tag, nxt)
  end
  return {'ok'}
elseif call == 'actors' then
  local page = redis.call('HSCAN', KEYS[2], ARGV[2], 'COUNT', 200)
  local tags = {}
  for i = 1, #page[2], 2 do tags[#tags + 1] = page[2][i] end
  return {'actors', page[1], tags}
end
return redis.error_reply('ERR countersign: unknown directory call')
