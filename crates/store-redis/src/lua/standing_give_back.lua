-- standing_give_back: KEYS[1] = the standing grant's key; ARGV[1] = id,
-- ARGV[2] = the slot prefix, ARGV[3] = the fingerprint of its fixed fields
-- as the library read and validated them, ARGV[4] = retention ms, ARGV[5]
-- = caller's now (ms), ARGV[6] = attempt id. A record whose fixed fields
-- changed since answers 'changed' and nothing is written. Rules of
-- decide_give_back, in its order; replies with the outcome, the record as
-- it was before the call and what the script saw. A stopped grant answers
-- 'stopped', a revoked or locked one 'revoked', and nothing is written;
-- 'retired' is the revoke that one attempt too many to remember causes.
local reply, g, stopped, now, attempt = open_for_attempt(KEYS, ARGV)
if reply ~= nil then return reply end
local before = g.raw
if stopped then return {'stopped', before, meta(stopped)} end
if g.state == REVOKED or g.state == LOCKED then return {'revoked', before, meta(stopped)} end
local known, held = contains(g.given, attempt), contains(g.used, attempt)
local key, slot, retention = KEYS[1], ARGV[2], tonumber(ARGV[4])
local base = math.max(ms(g.expires_at), ms(now))
-- Its use, if it held one, is free again whatever the answer.
local used = without(g.used, attempt)
-- Only an attempt whose use is released is remembered, and only those
-- count towards the limit: a give-back of no use changes nothing.
if held and not known and #g.given >= MAX_ABANDONED then
  local moved = save_standing(slot, key, g, base, retention, REVOKED, g.failed, used, g.given)
  return {'retired', before, meta(stopped, moved)}
end
local given = g.given
if held and not known then given[#given + 1] = attempt end
-- Written also when nothing changes (a repeated give-back), so that a
-- WAIT after this call also covers the first one.
local moved = save_standing(slot, key, g, base, retention, g.state, g.failed, used, given)
if uint_ge(now, g.expires_at) then return {'expired', before, meta(stopped, moved)} end
if held then return {'restored', before, meta(stopped, moved)} end
return {'usable', before, meta(stopped, moved)}
