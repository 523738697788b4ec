-- countersign standing grants (counted grants: "up to N uses until T"),
-- shared by the standing scripts (it follows the grant prelude and uses its
-- helpers). Standing record format 1.
-- A standing grant lives in its actor's slot, beside the actor's and its
-- run's stop fences, so that a use and a stop of its run are one script
-- each in one slot, ordered one before the other:
--   <slot>:standing:<id>     a standing grant (string: one record, see below)
--   <slot>:standings:<run>   the run's standing grants (zset, score issued_at,
--                            member the id: equal scores sort by id, so the
--                            set is in (issued_at, id) order)
--   <slot>:standing-runs     the actor's runs with a standing index (set), so
--                            that a stop of the actor can count what it ends
--
-- A record is a format byte, then the S_FIELDS in order, each in the grant
-- record's field encoding. The fields up to S_LAST_FIXED never change
-- after issue (the fingerprint covers them); writes rewrite the rest: the
-- state, the count of failed attempts, and two space-separated lists of
-- attempt ids, the ones holding a use (oldest first) and the ones that
-- gave theirs back.

local S_FORMAT = 1
local S_FIELDS = {
  'id', 'actor', 'run', 'scope', 'uses', 'issued_at', 'expires_at', 'approver',
  'approved_at', 'attempt_limit', 'rgen', 'agen', 'state', 'failed', 'used_by', 'abandoned',
}
-- The last field written at issue: it and every field before it never
-- change.
local S_LAST_FIXED = 12
local MAX_USES = 100

local function standing_key(slot, id) return slot .. ':standing:' .. id end
local function standings_key(slot, run) return slot .. ':standings:' .. run end
local function standing_runs_key(slot) return slot .. ':standing-runs' end

-- The fields of s from byte `pos` to its end, in order (false for absent
-- ones), and where each ends; nil when the bytes are not fields.
local function split_fields(s, pos)
  local values, ends = {}, {}
  while pos <= #s do
    local value, after = read_field(s, pos)
    if value == nil then return nil end
    values[#values + 1] = value
    ends[#ends + 1] = after - 1
    pos = after
  end
  return values, ends
end

-- A decimal count from 1 to `most`.
local function is_count(s, most)
  return is_u32(s) and tonumber(s) >= 1 and tonumber(s) <= most
end

-- Why the changing fields of standing grant g do not fit it, checked
-- exactly as strictly as the library reads them (a script writes only to
-- a record whose fixed fields the library validated and whose changing
-- fields pass these checks), or nil.
local function standing_error(g)
  if g.state ~= ACTIVE and g.state ~= REVOKED and g.state ~= LOCKED then
    return 'unknown state'
  end
  if not is_u32(g.failed) then return 'failed is not a count' end
  local used = list_error('used_by', g.used_by, tonumber(g.uses))
  if used ~= nil then return used end
  local bad = failed_error(g.state == LOCKED, tonumber(g.failed), tonumber(g.attempt_limit))
    or list_error('abandoned', g.abandoned, MAX_ABANDONED)
  if bad ~= nil then return bad end
  local held = {}
  for _, attempt in ipairs(attempt_list(g.used_by)) do held[attempt] = true end
  for _, attempt in ipairs(attempt_list(g.abandoned)) do
    if held[attempt] then return 'an attempt holds a use it gave back' end
  end
  return nil
end

-- Reads record s as the standing grant id (nil: any id). Returns 'ok' and
-- its fields by name (absent ones nil; `raw` the record, `fixed_end` where
-- its fixed fields end, `used` and `given` its two lists); or 'corrupt' and
-- a reason.
local function parse_standing(s, id)
  if #s == 0 then return 'corrupt', 'standing record is empty' end
  local format = string.byte(s, 1)
  if format ~= S_FORMAT then
    return 'corrupt', 'unsupported standing record format ' .. format
  end
  local values, ends = split_fields(s, 2)
  if values == nil then return 'corrupt', 'standing record holds bytes that are not a field' end
  if #values ~= #S_FIELDS then
    return 'corrupt', 'standing record does not hold ' .. #S_FIELDS .. ' fields'
  end
  local g = {raw = s, fixed_end = ends[S_LAST_FIXED]}
  for i, name in ipairs(S_FIELDS) do
    if values[i] == false then
      if name ~= 'used_by' and name ~= 'abandoned' then
        return 'corrupt', 'standing record lacks ' .. name
      end
    else
      g[name] = values[i]
    end
  end
  if (id ~= nil and g.id ~= id) or not is_token(g.id) then
    return 'corrupt', 'id field does not match the key'
  end
  if not is_count(g.uses, MAX_USES) then return 'corrupt', 'uses is not 1 to 100' end
  if not is_count(g.attempt_limit, MAX_ATTEMPT_LIMIT) then
    return 'corrupt', 'attempt_limit is not 1 to 100'
  end
  for _, name in ipairs({'issued_at', 'expires_at', 'approved_at'}) do
    if not is_u64(g[name]) then return 'corrupt', name .. ' is not a timestamp' end
  end
  if not is_u64(g.rgen) or not is_u64(g.agen) then
    return 'corrupt', 'generation is not a decimal integer'
  end
  local bad = standing_error(g)
  if bad ~= nil then return 'corrupt', bad end
  g.used, g.given = attempt_list(g.used_by), attempt_list(g.abandoned)
  return 'ok', g
end

-- Reads the standing grant at key. Returns 'missing'; or 'corrupt' and a
-- reason; or 'ok' and the fields. (GET first, TYPE only when it fails.)
local function load_standing(key, id)
  local s = redis.pcall('GET', key)
  if s == false then return 'missing' end
  if type(s) ~= 'string' then
    return 'corrupt', 'key holds a ' .. redis.call('TYPE', key)['ok'] .. ', not a standing grant'
  end
  return parse_standing(s, id)
end

-- The digest of a standing grant's fixed fields: the SHA-1 of the bytes
-- they take. The get script hands it out; a write goes only to a record
-- that still has the digest the library validated.
local function standing_fingerprint(g)
  return redis.sha1hex(string.sub(g.raw, 1, g.fixed_end))
end

-- Whether standing grant g was stopped since it was issued, by the actor's
-- fence a and its run's fence r: a generation moved on.
local function standing_stopped_by(g, a, r)
  return g.rgen ~= r.gen or g.agen ~= a.gen
end

-- Whether standing grant g is usable at `now` (StoredStanding::is_usable_at
-- with the stop derived from the fences a and r): active, not stopped
-- since issued, unexpired, a use left.
local function standing_usable(g, a, r, now)
  return g.state == ACTIVE and not standing_stopped_by(g, a, r)
    and not uint_ge(now, g.expires_at) and #g.used < tonumber(g.uses)
end

-- The opening of every standing script on one grant: KEYS[1] = its key,
-- ARGV[1] = its id, ARGV[2] = the slot prefix, ARGV[3] = the fingerprint
-- of its fixed fields as the library validated them (nil: a read, which
-- takes any). Returns the reply to give at once (a bad key, unknown,
-- corrupt, changed); or nil, the fields and whether the grant was stopped
-- since it was issued.
local function open_standing(keys, argv, fingerprint)
  local key, id, slot = keys[1], argv[1], argv[2]
  if key ~= standing_key(slot, id) then
    return redis.error_reply('ERR countersign: the key is not the standing key of the slot and id')
  end
  local status, g = load_standing(key, id)
  if status == 'missing' then return {'unknown'} end
  if status == 'corrupt' then return {'corrupt', g} end
  if fingerprint ~= nil and standing_fingerprint(g) ~= fingerprint then return {'changed'} end
  local fs, stopped, fkey = is_stopped(slot, g)
  if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
  return nil, g, stopped
end

-- open_standing for a call of one attempt (ARGV[6]) at the caller's now
-- (ARGV[5]), both checked, the fingerprint in ARGV[3]: the reply to give
-- at once; or nil, the fields, whether the grant was stopped since it was
-- issued, now and the attempt.
local function open_for_attempt(keys, argv)
  local reply, g, stopped = open_standing(keys, argv, argv[3])
  if reply ~= nil then return reply end
  local now, attempt = argv[5], argv[6]
  if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
  if not is_token(attempt) then
    return redis.error_reply('ERR countersign: attempt is not an attempt id')
  end
  return nil, g, stopped, now, attempt
end

-- A list of attempt ids as a record field: space-separated, nil when empty.
local function joined(list)
  if #list == 0 then return nil end
  return table.concat(list, ' ')
end

-- The list without `item`.
local function without(list, item)
  local out = {}
  for _, x in ipairs(list) do
    if x ~= item then out[#out + 1] = x end
  end
  return out
end

-- Writes standing grant g (in slot, at key) back with these changing
-- fields, kept until max(base, server time) + retention or its later
-- expiry; when the expiry moves, its run's index and both fences are kept
-- as long (they must outlive it). Returns the new expiry when it moved,
-- else nil.
local function save_standing(slot, key, g, base, retention, state, failed, used, given)
  local value = string.sub(g.raw, 1, g.fixed_end) .. field(state) .. field(failed)
    .. field(joined(used)) .. field(joined(given))
  local moved = rewrite(key, value, base, retention)
  if moved ~= nil then
    extend(standings_key(slot, g.run), moved)
    keep_fence(actor_fence_key(slot), moved)
    keep_fence(run_fence_key(slot, g.run), moved)
  end
  return moved
end
