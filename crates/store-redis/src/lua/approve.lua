-- approve: one step that approves a pending proposal and issues its grant,
-- both or neither. The script is the preludes, issue.lua's body wrapped as
-- `issue_grant(KEYS, ARGV)`, then this.
-- KEYS[1] = proposal key, KEYS[2] = the run's pending index, KEYS[3..7] =
-- the grant's keys as issue takes them (grant key, actor fence, run fence,
-- live set, run set; all in the actor's slot). ARGV[1] = proposal id,
-- ARGV[2] = caller's now (ms), ARGV[3] = the fingerprint of the proposal's
-- fixed fields as the library read and validated them, ARGV[4] = the slot
-- prefix, ARGV[5] = retention ms, ARGV[6] = the grant's id, ARGV[7] = its
-- approver's id ('' for none), ARGV[8..15] = issue's ARGV[1..8],
-- ARGV[16..18] = the `proposal.decided` event (id, body, due; an empty id
-- without an outbox), recorded only when the proposal turns approved.
-- A record whose fixed fields changed since answers 'changed'. Then, in
-- the order of decide_proposal: decided, expired, stopped since proposed
-- answer with nothing written; a grant id already present answers
-- 'grant_exists' and nothing is written (issue writes nothing when it
-- refuses). Otherwise the grant is issued exactly as issue does, and only
-- once it is, the proposal turns approved, kept as long as its grant.
-- Replies carry the proposal's tagged head as it was before the call and what the
-- script saw (stopped, and the record's new expiry when it moved).
local key, id, now, slot = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local err = check_proposal_key(key, slot, id)
if err then return err end
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
local bad_event = outbox_check(ARGV, 16)
if bad_event then return bad_event end
local status, p = load_proposal(key, id)
if status == 'missing' then return {'unknown'} end
if status == 'corrupt' then return {'corrupt', p} end
if proposal_fingerprint(p) ~= ARGV[3] then return {'changed'} end
-- The grant goes into the proposal's own slot and run, under the id given.
if KEYS[2] ~= pending_key(slot, p.run) or KEYS[3] ~= grant_key(slot, ARGV[6])
    or KEYS[4] ~= actor_fence_key(slot) or KEYS[5] ~= run_fence_key(slot, p.run)
    or KEYS[6] ~= live_key(slot, p.run) or KEYS[7] ~= runs_key(slot)
    or ARGV[11] ~= ARGV[6] or ARGV[12] ~= p.run or ARGV[14] ~= slot then
  return redis.error_reply('ERR countersign: the grant is not in the proposal\'s slot and run')
end
local fs, stopped, fkey = proposal_stopped(slot, p)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
local seen = tagged_head(p)
if p.state ~= PENDING then return {'decided', seen, meta(stopped)} end
if uint_ge(now, p.expires_at) then return {'expired', seen, meta(stopped)} end
if stopped then return {'stopped', seen, meta(stopped)} end
local issued = issue_grant({KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]},
  {ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]})
if type(issued) ~= 'table' then
  return redis.error_reply('ERR countersign: unexpected reply from issue')
end
-- An error reply of issue's own checks: passed on as it is.
if issued.err ~= nil then return issued end
local word = issued[1]
if word == 'exists' then return {'grant_exists', seen, meta(stopped)} end
-- Not reached: the fences were read above in this same step.
if word == 'stopped' then return {'stopped', seen, meta(true)} end
if word == 'corrupt' then return {'corrupt', issued[2], issued[3]} end
if word ~= 'issued' then
  return redis.error_reply('ERR countersign: unexpected reply from issue')
end
-- The grant is stored: the proposal is approved in the same step, and kept
-- at least as long as the grant (rule 7 of the proposal contract).
local by = ARGV[7]
if by == '' then by = nil end
local keep = expiry(ms(ARGV[10]), tonumber(ARGV[5]))
local moved = save_decision(key, p, APPROVED, ARGV[6], by, now, keep)
redis.call('ZREM', KEYS[2], pending_member(p))
keep_fence(KEYS[4], keep)
keep_fence(KEYS[5], keep)
outbox_record(slot, ARGV, 16)
return {'approved', seen, issued[2] or '', meta(stopped, moved)}
