-- consume: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = caller's now (ms),
-- ARGV[3] = attempt id, ARGV[4..7] = actor, run, url, digest (the binding),
-- ARGV[8] = retention ms, ARGV[9] = the fingerprint of the record as the
-- library read and validated it. A record that changed since answers
-- 'changed' and nothing is written. Checks in the store contract's order;
-- replies with the outcome and the record as it was before the call.
local key = KEYS[1]
local now, attempt = ARGV[2], ARGV[3]
local status, f, flat = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if fingerprint(flat) ~= ARGV[9] then return {'changed'} end
if not is_uint(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
local retention = tonumber(ARGV[8])
if contains(abandoned_list(f), attempt) then return {'stale_abandoned', flat} end
if f.state == 'revoked' then return {'stale_revoked', flat} end
local same = f.actor == ARGV[4] and f.run == ARGV[5] and f.url == ARGV[6]
  and f.digest == ARGV[7]
if f.state == 'consumed' then
  if f.consumed_by == attempt and same then
    -- A retry of the winning attempt: rewrite the expiry so that a WAIT
    -- after this call also covers the original consume.
    keep_until(key, math.max(ms(f.expires_at), ms(now)), retention)
    return {'replay', flat}
  end
  return {'stale_consumed', flat}
end
if uint_ge(now, f.expires_at) then return {'stale_expired', flat} end
if not same then return {'stale_mismatch', flat} end
redis.call('HSET', key, 'state', 'consumed', 'consumed_at', now, 'consumed_by', attempt)
keep_until(key, math.max(ms(f.expires_at), ms(now)), retention)
return {'consumed', flat}
