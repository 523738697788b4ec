-- deny: KEYS[1] = proposal key, KEYS[2] = the run's pending index (in the
-- actor's slot); ARGV[1] = proposal id, ARGV[2] = caller's now (ms),
-- ARGV[3] = the fingerprint of the proposal's fixed fields as the library
-- read and validated them, ARGV[4] = the slot prefix, ARGV[5] = the
-- approver's id ('' for none), ARGV[6..8] = the `proposal.decided` event
-- (id, body, due; an empty id without an outbox), recorded only when the
-- proposal turns denied. A record whose fixed fields changed since
-- answers 'changed'. In the order of decide_proposal: decided and expired
-- answer with nothing written; otherwise the proposal turns denied, also in
-- a stopped run (a denial stores no grant). Replies carry the proposal's
-- tagged head as it was before the call and what the script saw.
local key, id, now, slot = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local err = check_proposal_key(key, slot, id)
if err then return err end
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
local bad_event = outbox_check(ARGV, 6)
if bad_event then return bad_event end
local status, p = load_proposal(key, id)
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', p} end
if proposal_fingerprint(p) ~= ARGV[3] then return {'changed'} end
if KEYS[2] ~= pending_key(slot, p.run) then
  return redis.error_reply('ERR countersign: the key is not the pending index of the proposal')
end
local fs, stopped, fkey = proposal_stopped(slot, p)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local seen = tagged_head(p)
if p.state ~= PENDING then return {'decided', seen, meta(stopped)} end
if uint_ge(now, p.expires_at) then return {'expired', seen, meta(stopped)} end
local by = ARGV[5]
if by == '' then by = nil end
save_decision(key, p, DENIED, nil, by, now, nil)
redis.call('ZREM', KEYS[2], pending_member(p))
outbox_record(slot, ARGV, 6)
return {'denied', seen, meta(stopped)}
