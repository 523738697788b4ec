-- The notification outbox of one actor's slot (every key in the slot):
--   <slot>:outbox      sorted set of the waiting events, scored by when each
--                      is next claimable (due, or its claim lapsing); the
--                      member is the event's recording number, 20 digits,
--                      ':' and its id, so ties go in recording order.
--   <slot>:events      hash from event id to {m = member, a = attempts,
--                      b = the event as the library encoded it}.
--   <slot>:done        sorted set of finished event ids, scored by when
--                      each finished: forgotten a day later.
--   <slot>:outbox_seq  the recording counter.
-- A step that records an event calls outbox_add in its own script, so the
-- event is written with the step or not at all.

local function outbox_keys(slot)
  return slot .. ':outbox', slot .. ':events', slot .. ':done', slot .. ':outbox_seq'
end

-- Adds event `id` (`body` as the library encoded it), due at `due` (a
-- decimal integer of ms), unless an event with this id waits or finished
-- and is not yet forgotten. True when added.
local function outbox_add(slot, id, body, due)
  local outbox, events, done, seq_key = outbox_keys(slot)
  if redis.call('HEXISTS', events, id) == 1 then return false end
  if redis.call('ZSCORE', done, id) then return false end
  local seq = redis.call('INCR', seq_key)
  local member = string.format('%020d', seq) .. ':' .. id
  redis.call('HSET', events, id, cjson.encode({m = member, a = 0, b = body}))
  redis.call('ZADD', outbox, due, member)
  return true
end

-- The event a step passed in ARGV[i..i+2] (id, body, due) is well formed
-- (or absent: an empty id, the store keeps no outbox): an error reply
-- otherwise, for the step to return before it writes anything.
local function outbox_check(argv, i)
  local id = argv[i]
  if id == nil or id == '' then return nil end
  if argv[i + 1] == nil or not is_u64(argv[i + 2]) then
    return redis.error_reply('ERR countersign: the event is not an id, a body and a due time')
  end
  return nil
end

-- Records the event a step passed in ARGV[i..i+2], checked by outbox_check.
local function outbox_record(slot, argv, i)
  local id = argv[i]
  if id == nil or id == '' then return end
  outbox_add(slot, id, argv[i + 1], argv[i + 2])
end
