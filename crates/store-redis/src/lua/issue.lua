-- issue: KEYS[1] = grant key, KEYS[2] = the actor's fence, KEYS[3] = the
-- run's fence, KEYS[4] = the run's live set, KEYS[5] = the actor's run set
-- (all in the actor's slot); ARGV[1] = issue token (16 raw bytes, fresh per
-- issue call), ARGV[2] = retention ms, ARGV[3] = max(expires_at,
-- issued_at), ARGV[4] = id, ARGV[5] = run id, ARGV[6] = expires_at, ARGV[7]
-- = the slot prefix, ARGV[8] = the record up to the generations, as the
-- library encoded it.
-- Never overwrites. A key holding this call's own token is a resent copy of
-- this same call (the first reply was lost) and answers issued again. A
-- stopped run or actor answers 'stopped' and nothing is written; the check
-- and the write are one step, so an issue racing a stop is either before it
-- (and stopped by it) or refused. A new record's reply carries the
-- fingerprint of its fixed fields.
local key = KEYS[1]
local err = check_key(key, ARGV[7], ARGV[4])
if err then return err end
if redis.call('EXISTS', key) == 1 then
  if redis.call('TYPE', key)['ok'] == 'string'
    and token_of(redis.call('GET', key)) == ARGV[1] then
    return {'issued'}
  end
  return {'exists'}
end
local id, run, slot = ARGV[4], ARGV[5], ARGV[7]
local refused, a, r, make_fences = fences_for_new(slot, run)
if refused ~= nil then return refused end
make_fences()
local fixed = ARGV[8] .. field(r.gen) .. field(a.gen)
-- A new grant: active, no failed attempt, nothing consumed or abandoned.
redis.call('SET', key, fixed .. field(ACTIVE) .. field('0') .. field(nil) .. field(nil) .. field(nil))
-- Prune what expired: the two earliest grants of the run's live set, and
-- two runs of the actor whose live set is gone.
prune(KEYS[4], function(member) return grant_key(slot, id_of(member)) end)
for _, other in ipairs(redis.call('SRANDMEMBER', KEYS[5], 2)) do
  if other ~= run and redis.call('EXISTS', live_key(slot, other)) == 0 then
    redis.call('SREM', KEYS[5], other)
  end
end
redis.call('ZADD', KEYS[4], ARGV[6], member_of(id))
redis.call('SADD', KEYS[5], run)
keep_grant(slot, key, {run = run}, ms(ARGV[3]), tonumber(ARGV[2]))
return {'issued', redis.sha1hex(fixed)}
