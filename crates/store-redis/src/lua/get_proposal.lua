-- get_proposal: KEYS[1] = proposal key; ARGV[1] = id, ARGV[2] = the actor's
-- slot prefix, ARGV[3] = 'full' (the whole record, screenshot included) or
-- 'head' (the tagged head alone, read with GETRANGE: what a decision needs).
-- Reads only. A found proposal comes with the fingerprint of its fixed
-- fields and whether its run or actor was stopped since it was made.
local key, id, slot = KEYS[1], ARGV[1], ARGV[2]
local err = check_proposal_key(key, slot, id)
if err then return err end
local status, p
if ARGV[3] == 'full' then
  status, p = load_proposal(key, id)
elseif ARGV[3] == 'head' then
  status, p = load_head(key, id)
else
  return redis.error_reply('ERR countersign: unknown proposal read mode')
end
if status == 'missing' then return {'missing'} end
if status == 'corrupt' then return {'corrupt', p} end
local fs, stopped, fkey = proposal_stopped(slot, p)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local shown = tagged_head(p)
if ARGV[3] == 'full' then shown = p.raw end
return {'found', shown, proposal_fingerprint(p), meta(stopped, nil)}
