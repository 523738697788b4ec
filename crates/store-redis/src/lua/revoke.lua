-- revoke: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = retention ms,
-- ARGV[3] = the fingerprint of the record as the library read and validated
-- it. A record that changed since answers 'changed' and nothing is written.
-- Replies with the outcome and the record as it was before the call.
local key = KEYS[1]
local status, f, flat = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if fingerprint(flat) ~= ARGV[3] then return {'changed'} end
local retention = tonumber(ARGV[2])
if f.state == 'active' then
  redis.call('HSET', key, 'state', 'revoked')
  keep_until(key, ms(f.expires_at), retention)
  return {'revoked', flat}
elseif f.state == 'revoked' then
  keep_until(key, ms(f.expires_at), retention)
  return {'already_revoked', flat}
end
return {'already_consumed', flat}
