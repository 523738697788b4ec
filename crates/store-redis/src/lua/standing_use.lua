-- standing_use: KEYS[1] = the standing grant's key; ARGV[1] = id, ARGV[2]
-- = the slot prefix, ARGV[3] = the fingerprint of its fixed fields as the
-- library read and validated them, ARGV[4] = retention ms, ARGV[5] =
-- caller's now (ms), ARGV[6] = attempt id, ARGV[7..9] = the key the use
-- presents (actor, run, scope). A record whose fixed fields changed since
-- answers 'changed' and nothing is written. Checks in decide_use's order;
-- replies with the outcome, the record as it was before the call and what
-- the script saw (stopped, and the record's new expiry when it moved).
-- Statuses: 'used' (a use taken), 'replay' (this attempt holds one),
-- 'locked' (this mismatch locked it), 'stale_mismatch' (a mismatch counted),
-- 'held_mismatch' (this attempt holds a use under another key: nothing
-- counted), else 'stale_<reason>' with nothing written.
local reply, g, stopped, now, attempt = open_for_attempt(KEYS, ARGV)
if reply ~= nil then return reply end
local key, slot, retention, before = KEYS[1], ARGV[2], tonumber(ARGV[4]), g.raw
local function answer(status, moved) return {status, before, meta(stopped, moved)} end
local function write_back(state, failed, used)
  return save_standing(slot, key, g, math.max(ms(g.expires_at), ms(now)), retention, state,
    failed, used, g.given)
end
if contains(g.given, attempt) then return answer('stale_abandoned') end
if stopped then return answer('stale_stopped') end
if g.state == REVOKED then return answer('stale_revoked') end
if g.state == LOCKED then return answer('stale_locked') end
local keyed = g.actor == ARGV[7] and g.run == ARGV[8] and g.scope == ARGV[9]
if contains(g.used, attempt) then
  if not keyed then return answer('held_mismatch') end
  -- A retry of a use taken before: the record is rewritten unchanged, so
  -- that a WAIT after this call also covers the first use.
  return answer('replay', write_back(g.state, g.failed, g.used))
end
if uint_ge(now, g.expires_at) then return answer('stale_expired') end
if not keyed then
  local failed = tonumber(g.failed) + 1
  if failed >= tonumber(g.attempt_limit) then
    return answer('locked', write_back(LOCKED, fmt(failed), g.used))
  end
  return answer('stale_mismatch', write_back(g.state, fmt(failed), g.used))
end
if #g.used >= tonumber(g.uses) then return answer('stale_consumed') end
g.used[#g.used + 1] = attempt
return answer('used', write_back(g.state, g.failed, g.used))
