-- propose: KEYS[1] = proposal key, KEYS[2] = the actor's fence, KEYS[3] =
-- the run's fence, KEYS[4] = the run's pending index (all in the actor's
-- slot); ARGV[1] = id, ARGV[2] = run id, ARGV[3] = the slot prefix, ARGV[4]
-- = retention ms, ARGV[5] = max(expires_at, proposed_at), ARGV[6] =
-- proposed_at, ARGV[7] = the head's fields up to the generations, as the
-- library encoded them, ARGV[8] = the screenshot field, ARGV[9..11] = the
-- `proposal.created` event (id, body, due; an empty id without an outbox),
-- recorded only when the proposal is.
-- Never overwrites: an existing key answers 'exists'. A stopped run or
-- actor answers 'stopped' and nothing is written; the check and the write
-- are one step, so a propose racing a stop is either before it (and
-- stopped by it) or refused. The record keeps the fences' generations, so
-- a later stop ends it for good, as it ends a grant.
local key, id, run, slot = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local err = check_proposal_key(key, slot, id)
if err then return err end
if KEYS[2] ~= actor_fence_key(slot) or KEYS[3] ~= run_fence_key(slot, run)
    or KEYS[4] ~= pending_key(slot, run) then
  return redis.error_reply('ERR countersign: the keys are not the proposal run keys of the slot')
end
if not is_u64(ARGV[6]) then
  return redis.error_reply('ERR countersign: proposed_at is not a decimal integer')
end
local bad_event = outbox_check(ARGV, 9)
if bad_event then return bad_event end
if redis.call('EXISTS', key) == 1 then return {'exists'} end
local refused, a, r, make_fences = fences_for_new(slot, run)
if refused ~= nil then return refused end
-- A new proposal: pending, nothing decided.
local head = ARGV[7] .. field(r.gen) .. field(a.gen) .. field(PENDING) .. field(nil)
  .. field(nil) .. field(nil)
local record = proposal_record(P_FORMAT, head, ARGV[8])
-- Only what the library reads back is stored.
local status, p = parse_proposal(record, id)
if status ~= 'ok' then
  return redis.error_reply('ERR countersign: the library encoded a bad proposal: ' .. p)
end
if p.run ~= run or p.proposed_at ~= ARGV[6] then
  return redis.error_reply('ERR countersign: the record is not of the run and time given')
end
-- The record will be written: a missing fence is made now, so that the
-- keeps below hold it as long as the record (a fence made later by a stop
-- and gone after its resume would read generation 0 and bring a stopped
-- proposal back).
make_fences()
local at = store_new(key, record, ms(ARGV[5]), tonumber(ARGV[4]))
prune(KEYS[4], function(member)
  local other = member_id(member)
  return other and proposal_key(slot, other)
end)
redis.call('ZADD', KEYS[4], 0, pending_member(p))
extend(KEYS[4], at)
-- The fences must outlive every record that holds their generations.
keep_fence(KEYS[2], at)
keep_fence(KEYS[3], at)
outbox_record(slot, ARGV, 9)
return {'proposed'}
