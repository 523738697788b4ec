-- list_proposals: KEYS[1] = the run's pending index; ARGV[1] = run id,
-- ARGV[2] = the actor's slot prefix, ARGV[3] = caller's now (ms), ARGV[4] =
-- the most to list. Walks the index oldest first (by proposed_at, then id)
-- and replies {'listed', heads}: the tagged heads of the proposals that are
-- pending, unexpired at now and not stopped since they were made, at most
-- ARGV[4] of them, without screenshots (read with GETRANGE, so a list
-- never copies them). Entries that can never be listed again are dropped
-- from the index on the way: a record gone (expired), a decided proposal,
-- one stopped since it was made (a stop is for good). An entry expired at
-- the caller's now stays: time is the caller's, and an earlier now lists it.
local refused, list = open_list(KEYS, ARGV, pending_key)
if refused ~= nil then return refused end
local index, run, slot, now, most = list.index, list.run, list.slot, list.now, list.most
local a, r = list.a, list.r
local heads = {}
for _, member in ipairs(redis.call('ZRANGE', index, 0, -1)) do
  if #heads >= most then break end
  local id = member_id(member)
  if id == nil then return {'corrupt', 'pending index holds a member that names no proposal', index} end
  local key = proposal_key(slot, id)
  local status, p = load_head(key, id)
  if status == 'missing' then
    redis.call('ZREM', index, member)
  elseif status == 'corrupt' then
    return {'corrupt', p, key}
  elseif p.run ~= run or pending_member(p) ~= member then
    return {'corrupt', 'pending index entry does not match its proposal', key}
  elseif p.state ~= PENDING or stopped_by(p, a, r) then
    redis.call('ZREM', index, member)
  elseif not uint_ge(now, p.expires_at) then
    heads[#heads + 1] = tagged_head(p)
  end
end
return {'listed', heads}
