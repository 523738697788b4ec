-- stop: one step that stops a run (ARGV[1] = 'run') or every run of an
-- actor (ARGV[1] = 'actor'). KEYS[1] = the actor's fence, KEYS[2] = the
-- actor's run set; for a run also KEYS[3] = the run's fence and KEYS[4] =
-- the run's live set (all in the actor's slot). ARGV[2] = caller's now
-- (ms), ARGV[3] = the slot prefix, ARGV[4] = the run id (for a run; empty
-- for an actor), ARGV[5..7] = the `run.stopped` event (id, body, due; an
-- empty id without an outbox), recorded with the stop.
-- Counts the grants that were usable until now (active, not stopped, not
-- expired at now), drops them from the live sets, then moves the fence's
-- generation on and sets its stopped flag: every grant issued before has
-- its old generation and is stopped for good, and the check of every
-- consume of them is in this same slot. A stopped fence never expires.
-- The standing grants usable until now (active, not stopped, unexpired, a
-- use left) are counted the same way, apart: for a run from its standing
-- index, for an actor from the index of each run in its standing-runs set.
-- Replies {'stopped', count, was_stopped, standing count}; a corrupt fence
-- is refused before anything is written.
local mode, now, slot = ARGV[1], ARGV[2], ARGV[3]
if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
local bad_event = outbox_check(ARGV, 5)
if bad_event then return bad_event end

-- The usable grants of one live set, at the fences' generations. A member
-- whose key is not a record of its id counts as not usable.
local function usable(live, rgen, agen)
  local n = 0
  for _, member in ipairs(redis.call('ZRANGE', live, 0, -1)) do
    local id = id_of(member)
    local s = redis.pcall('GET', grant_key(slot, id))
    if type(s) == 'string' then
      local status, g = parse(s, id)
      if status == 'ok' and g.state == ACTIVE and g.rgen == rgen and g.agen == agen
          and not uint_ge(now, g.expires_at) then
        n = n + 1
      end
    end
  end
  return n
end

-- The usable standing grants of one run's standing index, by the actor's
-- fence a and the run's fence r before this stop. A record that is missing
-- or does not read counts as not usable.
local function usable_standing(index, a, r)
  local n = 0
  for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    local status, g = load_standing(standing_key(slot, id), id)
    if status == 'ok' and standing_usable(g, a, r, now) then n = n + 1 end
  end
  return n
end

-- Moves the fence at key to the next generation, stopped, without expiry.
local function stop_fence(key, f, existed)
  if existed and f.stopped ~= '1' then
    local until_ms = expiry_of(key)
    if until_ms ~= nil and until_ms > 0 then
      if f.keep == nil or ms(f.keep) < until_ms then
        redis.call('HSET', key, 'keep', fmt(until_ms))
      end
    end
  end
  redis.call('HINCRBY', key, 'gen', 1)
  redis.call('HSET', key, 'stopped', '1')
  redis.call('PERSIST', key)
end

local sa, a, a_exists = fence(KEYS[1])
if sa ~= 'ok' then return {'corrupt', a, KEYS[1]} end
local count, standing = 0, 0
local was
if mode == 'run' then
  local run = ARGV[4]
  local sr, r, r_exists = fence(KEYS[3])
  if sr ~= 'ok' then return {'corrupt', r, KEYS[3]} end
  count = usable(KEYS[4], r.gen, a.gen)
  standing = usable_standing(standings_key(slot, run), a, r)
  redis.call('DEL', KEYS[4])
  redis.call('SREM', KEYS[2], run)
  was = r.stopped == '1'
  stop_fence(KEYS[3], r, r_exists)
elseif mode == 'actor' then
  local runs = redis.call('SMEMBERS', KEYS[2])
  local gens = {}
  for i, run in ipairs(runs) do
    local rkey = run_fence_key(slot, run)
    local sr, r = fence(rkey)
    if sr ~= 'ok' then return {'corrupt', r, rkey} end
    gens[i] = r.gen
  end
  for i, run in ipairs(runs) do
    local live = live_key(slot, run)
    count = count + usable(live, gens[i], a.gen)
    redis.call('DEL', live)
  end
  for _, run in ipairs(redis.call('SMEMBERS', standing_runs_key(slot))) do
    local rkey = run_fence_key(slot, run)
    local sr, r = fence(rkey)
    if sr ~= 'ok' then return {'corrupt', r, rkey} end
    standing = standing + usable_standing(standings_key(slot, run), a, r)
  end
  redis.call('DEL', KEYS[2])
  was = a.stopped == '1'
  stop_fence(KEYS[1], a, a_exists)
else
  return redis.error_reply('ERR countersign: unknown stop')
end
outbox_record(slot, ARGV, 5)
return {'stopped', fmt(count), was and '1' or '0', fmt(standing)}
