-- standing_issue: KEYS[1] = the standing grant's key, KEYS[2] = the actor's
-- fence, KEYS[3] = the run's fence, KEYS[4] = the run's standing index (all
-- in the actor's slot); ARGV[1] = id, ARGV[2] = the slot prefix, ARGV[3] =
-- run id, ARGV[4] = retention ms, ARGV[5] = max(expires_at, issued_at),
-- ARGV[6] = issued_at, ARGV[7] = the record up to the generations, as the
-- library encoded it.
-- Never overwrites: an existing key answers 'exists'. A stopped run or
-- actor answers 'stopped' and nothing is written; the check and the write
-- are one step, so an issue racing a stop is either before it (and stopped
-- by it) or refused. The record keeps the fences' generations, so a later
-- stop ends it for good, as it ends a grant.
local key, id, slot, run = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if key ~= standing_key(slot, id) or KEYS[2] ~= actor_fence_key(slot)
    or KEYS[3] ~= run_fence_key(slot, run) or KEYS[4] ~= standings_key(slot, run) then
  return redis.error_reply('ERR countersign: the keys are not the standing keys of the slot')
end
if redis.call('EXISTS', key) == 1 then return {'exists'} end
local refused, a, r, make_fences = fences_for_new(slot, run)
if refused ~= nil then return refused end
-- A new standing grant: active, no failed attempt, no use taken or given back.
local record = ARGV[7] .. field(r.gen) .. field(a.gen) .. field(ACTIVE) .. field('0')
  .. field(nil) .. field(nil)
-- Only what the library reads back is stored.
local status, g = parse_standing(record, id)
if status ~= 'ok' then
  return redis.error_reply('ERR countersign: the library encoded a bad standing grant: ' .. g)
end
if g.run ~= run or g.issued_at ~= ARGV[6] then
  return redis.error_reply('ERR countersign: the record is not of the run and time given')
end
-- A missing fence is made, to be kept as long as the record (below).
make_fences()
local at = store_new(key, record, ms(ARGV[5]), tonumber(ARGV[4]))
prune(KEYS[4], function(member) return standing_key(slot, member) end)
redis.call('ZADD', KEYS[4], g.issued_at, id)
extend(KEYS[4], at)
-- The actor's runs with a standing index, for a stop of the actor to
-- count; two runs whose index is gone are pruned on the way.
local runs = standing_runs_key(slot)
for _, other in ipairs(redis.call('SRANDMEMBER', runs, 2)) do
  if other ~= run and redis.call('EXISTS', standings_key(slot, other)) == 0 then
    redis.call('SREM', runs, other)
  end
end
redis.call('SADD', runs, run)
extend(runs, at)
-- The fences must outlive every record that holds their generations.
keep_fence(KEYS[2], at)
keep_fence(KEYS[3], at)
return {'issued'}
