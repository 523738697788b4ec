-- revoke: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = retention ms,
-- ARGV[3] = the fingerprint of the record's fixed fields as the library
-- read and validated them, ARGV[4] = the slot prefix. A record whose fixed
-- fields changed since answers 'changed' and nothing is written. Replies
-- with the outcome, the record as it was before the call, and what the
-- script saw. A stopped, locked or revoked grant answers 'already_revoked'
-- and keeps its state.
local key, slot = KEYS[1], ARGV[4]
local err = check_key(key, slot, ARGV[1])
if err then return err end
local status, f = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if fingerprint(f) ~= ARGV[3] then return {'changed'} end
local retention = tonumber(ARGV[2])
local fs, stopped, fkey = is_stopped(slot, f)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local before = f.raw
if f.state == CONSUMED then return {'already_consumed', before, meta(stopped)} end
-- A stopped grant is never written again.
if stopped then return {'already_revoked', before, meta(stopped)} end
if f.state == ACTIVE then
  local moved = save(slot, key, f, ms(f.expires_at), retention, false, REVOKED, f.failed, nil,
    nil, f.abandoned)
  redis.call('ZREM', live_key(slot, f.run), member_of(ARGV[1]))
  return {'revoked', before, meta(stopped, moved)}
end
-- Revoked or locked: the record is rewritten unchanged, so that a WAIT
-- after this call also covers the first revoke (or lock).
local moved = save(slot, key, f, ms(f.expires_at), retention, false, f.state, f.failed, nil, nil,
  f.abandoned)
return {'already_revoked', before, meta(stopped, moved)}
