-- standing_revoke: KEYS[1] = the standing grant's key; ARGV[1] = id,
-- ARGV[2] = the slot prefix, ARGV[3] = the fingerprint of its fixed fields
-- as the library read and validated them, ARGV[4] = retention ms. A record
-- whose fixed fields changed since answers 'changed' and nothing is
-- written. An active grant (spent or expired too) turns revoked for good:
-- 'revoked'. A revoked, locked or stopped one answers 'already_ended' and
-- is not written (a stopped grant is never written again). Replies with
-- the record as it was before the call and what the script saw.
local reply, g, stopped = open_standing(KEYS, ARGV, ARGV[3])
if reply ~= nil then return reply end
local before = g.raw
if stopped or g.state ~= ACTIVE then return {'already_ended', before, meta(stopped)} end
local moved = save_standing(ARGV[2], KEYS[1], g, ms(g.expires_at), tonumber(ARGV[4]), REVOKED,
  g.failed, g.used, g.given)
return {'revoked', before, meta(stopped, moved)}
