-- consume: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = caller's now (ms),
-- ARGV[3] = attempt id, ARGV[4..7] = actor, run, url, digest (the binding;
-- the digest as its 32 raw bytes), ARGV[8] = retention ms, ARGV[9] = the
-- fingerprint of the record's fixed fields as the library read and
-- validated them, ARGV[10] = the slot prefix. A record whose fixed fields
-- changed since answers 'changed' and nothing is written. Checks in the
-- store contract's order (decide_consume); replies with the outcome, the
-- record as it was before the call, and what the script saw (stopped, and
-- the grant's new expiry when it moved).
local key, slot = KEYS[1], ARGV[10]
local now, attempt = ARGV[2], ARGV[3]
local err = check_key(key, slot, ARGV[1])
if err then return err end
local status, f = load(key, ARGV[1])
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', f} end
if fingerprint(f) ~= ARGV[9] then return {'changed'} end
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
local retention = tonumber(ARGV[8])
local fs, stopped, fkey = is_stopped(slot, f)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local before = f.raw
if contains(abandoned_list(f), attempt) then return {'stale_abandoned', before, meta(stopped)} end
if stopped then return {'stale_stopped', before, meta(stopped)} end
if f.state == REVOKED then return {'stale_revoked', before, meta(stopped)} end
if f.state == LOCKED then return {'stale_locked', before, meta(stopped)} end
local base = math.max(ms(f.expires_at), ms(now))
local same = f.actor == ARGV[4] and f.run == ARGV[5] and f.url == ARGV[6]
  and f.digest == ARGV[7]
if f.state == CONSUMED then
  if f.consumed_by == attempt and same then
    -- A retry of the winning attempt: rewrite the record (unchanged) so
    -- that a WAIT after this call also covers the original consume.
    local moved = save(slot, key, f, base, retention, false, f.state, f.failed, f.consumed_at,
      f.consumed_by, f.abandoned)
    return {'replay', before, meta(stopped, moved)}
  end
  return {'stale_consumed', before, meta(stopped)}
end
if uint_ge(now, f.expires_at) then return {'stale_expired', before, meta(stopped)} end
if not same then
  local failed = tonumber(f.failed) + 1
  if failed >= tonumber(f.attempt_limit) then
    local moved = save(slot, key, f, base, retention, false, LOCKED, fmt(failed), nil, nil,
      f.abandoned)
    redis.call('ZREM', live_key(slot, f.run), member_of(ARGV[1]))
    return {'locked', before, meta(stopped, moved)}
  end
  local moved = save(slot, key, f, base, retention, false, f.state, fmt(failed), nil, nil,
    f.abandoned)
  return {'stale_mismatch', before, meta(stopped, moved)}
end
local moved = save(slot, key, f, base, retention, false, CONSUMED, f.failed, now, attempt,
  f.abandoned)
redis.call('ZREM', live_key(slot, f.run), member_of(ARGV[1]))
return {'consumed', before, meta(stopped, moved)}
