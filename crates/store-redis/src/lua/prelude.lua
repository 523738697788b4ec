-- countersign record helpers, shared by every script. Record format v=2.
-- A script touches only keys of one actor's slot: the keys start with the
-- slot prefix `{prefix}:{a<tag>}`, whose hash tag names one cluster slot.
--   <slot>:grant:<id>   a grant (hash)
--   <slot>:actor        the actor's fence (hash: gen, stopped, keep)
--   <slot>:run:<run>    a run's fence (hash: gen, stopped, keep)
--   <slot>:live:<run>   the run's grants that may still be usable (zset by expires_at)
--   <slot>:runs         the runs that have a live set (set)

local MAX_MS = 9007199254740991 -- 2^53 - 1: largest integer a Lua number holds exactly
local U64_MAX = '18446744073709551615'
local U32_MAX = 4294967295
local MAX_ABANDONED = 16
local MAX_ATTEMPT_LIMIT = 100

local KNOWN = {
  v = true, id = true, actor = true, run = true, url = true, action = true,
  digest = true, issued_at = true, expires_at = true, note = true,
  page_revision = true, operation_id = true, session_id = true, state = true,
  consumed_at = true, consumed_by = true, issue_token = true,
  abandoned = true, approver = true, approved_at = true, attempt_limit = true,
  failed = true, rgen = true, agen = true,
}
-- The fields a grant's writes change; every other field is fixed at issue
-- and covered by the record's fingerprint.
local MUTABLE_FIELDS = {'state', 'consumed_at', 'consumed_by', 'failed', 'abandoned'}
local MUTABLE = {}
for _, name in ipairs(MUTABLE_FIELDS) do MUTABLE[name] = 1 end
local REQUIRED = {
  'v', 'id', 'actor', 'run', 'url', 'action', 'digest', 'issued_at',
  'expires_at', 'state', 'issue_token', 'attempt_limit', 'failed', 'rgen', 'agen',
}

-- A decimal integer without sign or leading zeros, at most 20 digits.
local function is_uint(s)
  return type(s) == 'string' and #s >= 1 and #s <= 20
    and string.find(s, '^[0-9]+$') ~= nil
    and (s == '0' or string.sub(s, 1, 1) ~= '0')
end

-- a >= b for two strings that passed is_uint, exact for any length.
local function uint_ge(a, b)
  if #a ~= #b then return #a > #b end
  return a >= b
end

-- A decimal integer that fits 64 unsigned bits.
local function is_u64(s)
  return is_uint(s) and uint_ge(U64_MAX, s)
end

-- A decimal integer that fits 32 unsigned bits.
local function is_u32(s)
  return is_uint(s) and #s <= 10 and tonumber(s) <= U32_MAX
end

-- An attempt id: [A-Za-z0-9_-]{1,128}.
local function is_token(s)
  return type(s) == 'string' and #s >= 1 and #s <= 128
    and string.find(s, '^[A-Za-z0-9_%-]+$') ~= nil
end

-- A timestamp string as a Lua number, capped where doubles stop being exact.
local function ms(s)
  local n = tonumber(s)
  if n == nil or n > MAX_MS then return MAX_MS end
  return n
end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fmt(n)
  return string.format('%d', n)
end

-- The expiry a write gives a record: max(base, server time) + retention.
local function expiry(base, retention)
  local at = math.max(base, server_ms()) + retention
  if at > MAX_MS then at = MAX_MS end
  return at
end

-- The expiry key has (absolute ms), 0 when it has none, nil when it is missing.
local function expiry_of(key)
  local ttl = redis.call('PTTL', key)
  if ttl == -2 then return nil end
  if ttl < 0 then return 0 end
  return server_ms() + ttl
end

-- Moves key's expiry to `at`, or leaves a later one: expiry only moves
-- forward. A missing key stays missing. Returns true when it moved.
local function extend(key, at)
  local old = expiry_of(key)
  if old == nil or (old > 0 and old >= at) then return false end
  redis.call('PEXPIREAT', key, fmt(at))
  return true
end

-- Keeps the record until max(base, server time) + retention, or later if it
-- already was: expiry only ever moves forward.
local function keep_until(key, base, retention)
  extend(key, expiry(base, retention))
end

-- The attempt ids in a record's space-separated `abandoned` field.
local function abandoned_list(f)
  local list = {}
  if f.abandoned ~= nil then
    for attempt in string.gmatch(f.abandoned, '%S+') do list[#list + 1] = attempt end
  end
  return list
end

local function contains(list, item)
  for _, x in ipairs(list) do
    if x == item then return true end
  end
  return false
end

-- The fields a grant's writes change, checked exactly as strictly as the
-- library reads them: a script writes only to a record whose fixed fields
-- the library validated (same fingerprint) and whose changing fields pass
-- these checks, so it never writes to a record the library refuses.
local function check_mutable(f)
  if not is_u32(f.attempt_limit) then
    return 'attempt_limit is not a decimal integer'
  end
  local limit = tonumber(f.attempt_limit)
  if limit < 1 or limit > MAX_ATTEMPT_LIMIT then return 'attempt_limit is out of range' end
  if not is_u32(f.failed) then return 'failed is not a decimal integer' end
  local failed = tonumber(f.failed)
  if f.state == 'consumed' then
    if not is_u64(f.consumed_at) or not is_token(f.consumed_by) then
      return 'consumed record lacks consumed_at or consumed_by'
    end
  elseif f.state == 'active' or f.state == 'revoked' or f.state == 'locked' then
    if f.consumed_at ~= nil or f.consumed_by ~= nil then
      return 'unconsumed record has consumed fields'
    end
  else
    return 'unknown state'
  end
  if f.state == 'locked' then
    if failed ~= limit then return 'locked record does not count its limit of failed attempts' end
  elseif failed >= limit then
    return 'failed attempts reach the limit of a record that is not locked'
  end
  local a = f.abandoned
  if a ~= nil then
    if string.find(a, '^[A-Za-z0-9_%- ]+$') == nil or string.find(a, '^ ') ~= nil
        or string.find(a, ' $') ~= nil or string.find(a, '  ', 1, true) ~= nil then
      return 'abandoned is not a list of attempt ids'
    end
    local seen, count = {}, 0
    for attempt in string.gmatch(a, '%S+') do
      if #attempt > 128 then return 'abandoned is not a list of attempt ids' end
      if seen[attempt] then return 'abandoned repeats an attempt id' end
      seen[attempt] = true
      count = count + 1
    end
    if count > MAX_ABANDONED then return 'abandoned holds more attempts than the bound' end
  end
  return nil
end

-- Reads the grant at key and checks that it is a v=2 record for id.
-- Returns 'missing'; or 'corrupt' and a reason; or 'ok', the fields by name
-- and the flat HGETALL reply.
local function load(key, id)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 'missing' end
  if kind ~= 'hash' then return 'corrupt', 'key holds a ' .. kind .. ', not a hash' end
  local flat = redis.call('HGETALL', key)
  local f = {}
  for i = 1, #flat, 2 do
    local name = flat[i]
    if not KNOWN[name] then
      return 'corrupt', 'unknown field ' .. string.sub(name, 1, 64)
    end
    f[name] = flat[i + 1]
  end
  for _, name in ipairs(REQUIRED) do
    if f[name] == nil then return 'corrupt', 'missing field ' .. name end
  end
  if f.v ~= '2' then return 'corrupt', 'unsupported format version' end
  if f.id ~= id then return 'corrupt', 'id field does not match the key' end
  if #f.digest ~= 64 or string.find(f.digest, '^[0-9a-f]+$') == nil then
    return 'corrupt', 'digest is not 64 lower-case hex characters'
  end
  if not is_u64(f.issued_at) or not is_u64(f.expires_at) then
    return 'corrupt', 'timestamp is not a decimal integer'
  end
  if not is_u64(f.rgen) or not is_u64(f.agen) then
    return 'corrupt', 'generation is not a decimal integer'
  end
  local bad = check_mutable(f)
  if bad ~= nil then return 'corrupt', bad end
  return 'ok', f, flat
end

-- A digest of the record's fixed fields (everything but the fields its
-- writes change): names sorted, each name and value prefixed by its length,
-- so two different records never hash the same text. The get script hands
-- it out with the record; consume and revoke write only when the record
-- still has the digest of the one the library read and validated.
local function fingerprint(flat)
  local names, values = {}, {}
  for i = 1, #flat, 2 do
    if not MUTABLE[flat[i]] then
      names[#names + 1] = flat[i]
      values[flat[i]] = flat[i + 1]
    end
  end
  table.sort(names)
  local parts = {}
  for _, name in ipairs(names) do
    local value = values[name]
    parts[#parts + 1] = #name .. ':' .. name .. #value .. ':' .. value
  end
  return redis.sha1hex(table.concat(parts))
end

-- Reads a fence (an actor's or a run's). A missing fence is generation 0,
-- not stopped. Returns 'ok', the fields and whether the key exists; or
-- 'corrupt' and a reason.
local function fence(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 'ok', {gen = '0', stopped = '0'}, false end
  if kind ~= 'hash' then return 'corrupt', 'fence holds a ' .. kind end
  local flat = redis.call('HGETALL', key)
  local f = {}
  for i = 1, #flat, 2 do
    local name = flat[i]
    if name ~= 'gen' and name ~= 'stopped' and name ~= 'keep' then
      return 'corrupt', 'fence has an unknown field'
    end
    f[name] = flat[i + 1]
  end
  if not is_u64(f.gen) then
    return 'corrupt', 'fence has no decimal generation'
  end
  if f.stopped ~= '0' and f.stopped ~= '1' then
    return 'corrupt', 'fence has no stopped flag'
  end
  if f.keep ~= nil and not is_uint(f.keep) then
    return 'corrupt', 'fence has a bad keep time'
  end
  return 'ok', f, true
end

-- The key of the grant `id` in the slot `slot`.
local function grant_key(slot, id) return slot .. ':grant:' .. id end
local function run_fence_key(slot, run) return slot .. ':run:' .. run end
local function live_key(slot, run) return slot .. ':live:' .. run end
local function actor_fence_key(slot) return slot .. ':actor' end
local function runs_key(slot) return slot .. ':runs' end

-- Whether the grant f (in slot) was stopped since it was issued: its run's
-- or its actor's generation moved on. Returns 'ok' and the answer, or
-- 'corrupt', a reason and the fence's key.
local function is_stopped(slot, f)
  local akey, rkey = actor_fence_key(slot), run_fence_key(slot, f.run)
  local status, a = fence(akey)
  if status ~= 'ok' then return 'corrupt', a, akey end
  local status2, r = fence(rkey)
  if status2 ~= 'ok' then return 'corrupt', r, rkey end
  return 'ok', f.rgen ~= r.gen or f.agen ~= a.gen
end

-- Keeps a fence at least until `at`: a fence must outlive every grant that
-- recorded its generation. A stopped fence never expires (PERSIST); the
-- expiry it would have is kept in its `keep` field, for its resume.
local function keep_fence(key, at)
  if redis.call('EXISTS', key) == 0 then return end
  if redis.call('HGET', key, 'stopped') == '1' then
    local keep = redis.call('HGET', key, 'keep')
    if keep == false or ms(keep) < at then redis.call('HSET', key, 'keep', fmt(at)) end
    return
  end
  extend(key, at)
end

-- After a write to grant f (in slot, at key): keeps the grant until
-- max(base, server time) + retention (only forward), and its run's live
-- set, the actor's run set and both fences at least as long. Returns the
-- grant's new expiry when this moved it, else nil.
local function keep_grant(slot, key, f, base, retention)
  local at = expiry(base, retention)
  local moved = extend(key, at)
  extend(live_key(slot, f.run), at)
  extend(runs_key(slot), at)
  keep_fence(actor_fence_key(slot), at)
  keep_fence(run_fence_key(slot, f.run), at)
  if moved then return at end
  return nil
end

-- The reply's closing item: what the script saw besides the record.
local function meta(stopped, moved)
  local m = {'stopped', stopped and '1' or '0'}
  if moved ~= nil then
    m[#m + 1] = 'moved'
    m[#m + 1] = fmt(moved)
  end
  return m
end

-- The library's call names the grant key by the slot prefix and the id.
local function check_key(key, slot, id)
  if key ~= grant_key(slot, id) then
    return redis.error_reply('ERR countersign: the key is not the grant key of the slot and id')
  end
  return nil
end
