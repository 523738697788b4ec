-- standing_list: KEYS[1] = the run's standing index; ARGV[1] = run id,
-- ARGV[2] = the actor's slot prefix, ARGV[3] = caller's now (ms), ARGV[4] =
-- the most to list. Walks the index oldest first (by issued_at, then id)
-- and replies {'listed', records}: the standing grants usable at now
-- (active, not stopped since issued, unexpired, a use left), at most
-- ARGV[4] of them. Entries that can never be listed again are dropped from
-- the index on the way: a record gone (expired), one revoked or locked, one
-- stopped since it was issued (a stop is for good). A spent one stays (a
-- use given back frees it again), and so does one expired at the caller's
-- now: time is the caller's, and an earlier now lists it.
local refused, list = open_list(KEYS, ARGV, standings_key)
if refused ~= nil then return refused end
local records = {}
local entries = redis.call('ZRANGE', list.index, 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  if #records >= list.most then break end
  local id, score = entries[i], entries[i + 1]
  if not is_token(id) then
    return {'corrupt', 'standing index holds a member that names no standing grant', list.index}
  end
  local key = standing_key(list.slot, id)
  local status, g = load_standing(key, id)
  if status == 'missing' then
    redis.call('ZREM', list.index, id)
  elseif status == 'corrupt' then
    return {'corrupt', g, key}
  elseif g.run ~= list.run or tonumber(score) ~= tonumber(g.issued_at) then
    return {'corrupt', 'standing index entry does not match its standing grant', key}
  elseif g.state ~= ACTIVE or standing_stopped_by(g, list.a, list.r) then
    redis.call('ZREM', list.index, id)
  elseif standing_usable(g, list.a, list.r, list.now) then
    records[#records + 1] = g.raw
  end
end
return {'listed', records}
