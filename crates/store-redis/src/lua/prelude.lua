-- countersign record helpers, shared by every script. Record format v=4
-- (v=3 records, the previous version's, are read and kept as v=3).
-- A script touches only keys of one actor's slot: the keys start with the
-- slot prefix `{prefix}:{a<tag>}`, whose hash tag names one cluster slot.
--   <slot>:grant:<id>   a grant (string: one record, see below)
--   <slot>:actor        the actor's fence (hash: gen, stopped, keep)
--   <slot>:run:<run>    a run's fence (hash: gen, stopped, keep)
--   <slot>:live:<run>   the run's grants that may still be usable (zset by expires_at)
--   <slot>:runs         the runs that have a live set (set)
--
-- A record is one string, so that a grant costs one small allocation
-- whatever the server's hash encoding limits: a format byte, then the
-- FIELDS in order, each a length and that many bytes. A length up to
-- SHORT_MAX is one byte; LONG is followed by a 4-byte big-endian length
-- (only for longer fields); ABSENT is an optional field that is not set.
-- The fields up to `agen` never change after issue (the fingerprint covers
-- them); writes rewrite only the fields after them. A v=3 record has every
-- field but `element` (it binds no element); a write keeps its format byte.

local MAX_MS = 9007199254740991 -- 2^53 - 1: largest integer a Lua number holds exactly
local U64_MAX = '18446744073709551615'
local U32_MAX = 4294967295
local MAX_ABANDONED = 16
local MAX_ATTEMPT_LIMIT = 100
local FORMAT = 4
local OLD_FORMAT = 3
local SHORT_MAX = 252
local ABSENT = 253
local LONG = 254
local TOKEN_BYTES = 16
local DIGEST_BYTES = 32
local FIELDS = {
  'id', 'actor', 'run', 'url', 'action', 'digest', 'issued_at', 'expires_at',
  'attempt_limit', 'issue_token', 'approver', 'approved_at', 'note',
  'page_revision', 'operation_id', 'session_id', 'element', 'rgen', 'agen',
  'state', 'failed', 'consumed_at', 'consumed_by', 'abandoned',
}
-- The last field written at issue: it and every field before it never
-- change.
local LAST_FIXED = 'agen'
-- The optional fields: every other field must be present.
local OPTIONAL = {
  approver = true, approved_at = true, note = true, page_revision = true,
  operation_id = true, session_id = true, element = true,
  consumed_at = true, consumed_by = true, abandoned = true,
}
-- State codes, one byte each.
local ACTIVE, REVOKED, LOCKED, CONSUMED = 'a', 'r', 'l', 'c'

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

-- The server's time in ms, read once per script: every expiry a script
-- computes counts from the same instant, and TIME is not called again for
-- each key it keeps.
local server_time = nil
local function server_ms()
  if server_time == nil then
    local t = redis.call('TIME')
    server_time = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return server_time
end

local function fmt(n)
  return string.format('%d', n)
end

-- Lower-case hex of raw bytes, and back (for hex of even length).
local function to_hex(raw)
  return (string.gsub(raw, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
local function from_hex(hex)
  return (string.gsub(hex, '..', function(h) return string.char(tonumber(h, 16)) end))
end

-- A generated approval id (`apr_` and 32 lower-case hex digits) goes into
-- a run's live set as a zero byte and its 16 raw bytes, which no id text
-- can be (ids are [A-Za-z0-9_-]); any other id as its text.
local function member_of(id)
  if #id == 36 and string.find(id, '^apr_[0-9a-f]+$') ~= nil then
    return '\0' .. from_hex(string.sub(id, 5))
  end
  return id
end
local function id_of(member)
  if #member == 17 and string.byte(member, 1) == 0 then
    return 'apr_' .. to_hex(string.sub(member, 2))
  end
  return member
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

-- Stores a new record `value` at key, kept until max(base, server time) +
-- retention. Returns that expiry.
local function store_new(key, value, base, retention)
  redis.call('SET', key, value)
  local at = expiry(base, retention)
  redis.call('PEXPIREAT', key, fmt(at))
  return at
end

-- Prunes what expired from a run's index: of its two first members, those
-- whose record is gone. `key_of(member)` names a member's record (nil: the
-- member names none, and goes too).
local function prune(index, key_of)
  for _, member in ipairs(redis.call('ZRANGE', index, 0, 1)) do
    local key = key_of(member)
    if key == nil or redis.call('EXISTS', key) == 0 then redis.call('ZREM', index, member) end
  end
end

-- One field as a record stores it: its length, then its bytes; ABSENT for
-- nil or false.
local function field(value)
  if value == nil or value == false then return string.char(ABSENT) end
  local n = #value
  if n <= SHORT_MAX then return string.char(n) .. value end
  return string.char(LONG, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256) .. value
end

-- The field at byte `pos` of s: its value (false when absent) and the
-- position after it; nil when the bytes there are not a field.
local function read_field(s, pos)
  local n = string.byte(s, pos)
  if n == nil then return nil end
  if n <= SHORT_MAX then
    local stop = pos + n
    if stop > #s then return nil end
    return string.sub(s, pos + 1, stop), stop + 1
  elseif n == ABSENT then
    return false, pos + 1
  elseif n == LONG then
    local a, b, c, d = string.byte(s, pos + 1, pos + 4)
    if d == nil then return nil end
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    local stop = pos + 4 + len
    if len <= SHORT_MAX or stop > #s then return nil end
    return string.sub(s, pos + 5, stop), stop + 1
  end
  return nil
end

-- The issue token of record s, or nil when s is not laid out as a record
-- up to it (the issue script's check for a resent call of its own).
local function token_of(s)
  if type(s) ~= 'string' then return nil end
  local version = string.byte(s, 1)
  if version ~= FORMAT and version ~= OLD_FORMAT then return nil end
  local pos, value = 2, nil
  for _ = 1, 10 do
    value, pos = read_field(s, pos)
    if value == nil then return nil end
  end
  return value or nil
end

-- The attempt ids of a space-separated list field (nil: none).
local function attempt_list(text)
  local list = {}
  if text ~= nil then
    for attempt in string.gmatch(text, '%S+') do list[#list + 1] = attempt end
  end
  return list
end

-- The attempt ids in a record's space-separated `abandoned` field.
local function abandoned_list(f)
  return attempt_list(f.abandoned)
end

local function contains(list, item)
  for _, x in ipairs(list) do
    if x == item then return true end
  end
  return false
end

-- Why a record's count of failed attempts does not fit its state and its
-- attempt limit (a locked record counts exactly its limit, any other one
-- less), or nil: the same check and messages as the library's reader.
local function failed_error(locked, failed, limit)
  if locked then
    if failed ~= limit then return 'locked record does not count its limit of failed attempts' end
  elseif failed >= limit then
    return 'failed attempts reach the limit of a record that is not locked'
  end
  return nil
end

-- Why the space-separated list field `name` (nil: absent) is not a list
-- of at most `most` distinct attempt ids, or nil: the same check and
-- messages as the library's reader.
local function list_error(name, list, most)
  if list == nil then return nil end
  if string.find(list, '^[A-Za-z0-9_%- ]+$') == nil or string.find(list, '^ ') ~= nil
      or string.find(list, ' $') ~= nil or string.find(list, '  ', 1, true) ~= nil then
    return name .. ' is not a list of attempt ids'
  end
  local seen, count = {}, 0
  for attempt in string.gmatch(list, '%S+') do
    if #attempt > 128 then return name .. ' is not a list of attempt ids' end
    if seen[attempt] then return name .. ' repeats an attempt id' end
    seen[attempt] = true
    count = count + 1
  end
  if count > most then return name .. ' holds more attempts than the bound' end
  return nil
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
  if f.state == CONSUMED then
    -- The same checks in the same order as the library's reader, with
    -- the same messages: what is missing, else what is malformed.
    if f.consumed_at == nil then return 'consumed record lacks consumed_at' end
    if f.consumed_by == nil then return 'consumed record lacks consumed_by' end
    if not is_u64(f.consumed_at) then return 'consumed_at is not a timestamp' end
    if not is_token(f.consumed_by) then return 'consumed_by is not an attempt id' end
  elseif f.state == ACTIVE or f.state == REVOKED or f.state == LOCKED then
    if f.consumed_at ~= nil or f.consumed_by ~= nil then
      return 'unconsumed record has consumed fields'
    end
  else
    return 'unknown state'
  end
  return failed_error(f.state == LOCKED, failed, limit)
    or list_error('abandoned', f.abandoned, MAX_ABANDONED)
end

-- Reads record s as a v=4 (or v=3) record for id. Returns 'ok' and its fields by
-- name (absent ones nil; `raw` the record, `fixed_end` where its fixed
-- fields end); or 'corrupt' and a reason.
local function parse(s, id)
  if #s == 0 then return 'corrupt', 'record is empty' end
  local version = string.byte(s, 1)
  if version ~= FORMAT and version ~= OLD_FORMAT then
    return 'corrupt', 'unsupported record format version ' .. version
  end
  local f, pos = {raw = s}, 2
  for _, name in ipairs(FIELDS) do
    if name ~= 'element' or version == FORMAT then
      local value, after = read_field(s, pos)
      if value == nil then return 'corrupt', 'record is cut short at ' .. name end
      if value == false then
        if not OPTIONAL[name] then return 'corrupt', 'missing field ' .. name end
      else
        f[name] = value
      end
      pos = after
      if name == LAST_FIXED then f.fixed_end = pos - 1 end
    end
  end
  if pos ~= #s + 1 then return 'corrupt', 'record has bytes after its last field' end
  if f.id ~= id then return 'corrupt', 'id field does not match the key' end
  if #f.digest ~= DIGEST_BYTES then return 'corrupt', 'digest is not 32 bytes' end
  if #f.issue_token ~= TOKEN_BYTES then return 'corrupt', 'issue token is not 16 bytes' end
  if not is_u64(f.issued_at) or not is_u64(f.expires_at) then
    return 'corrupt', 'timestamp is not a decimal integer'
  end
  if not is_u64(f.rgen) or not is_u64(f.agen) then
    return 'corrupt', 'generation is not a decimal integer'
  end
  local bad = check_mutable(f)
  if bad ~= nil then return 'corrupt', bad end
  return 'ok', f
end

-- Reads the grant at key and checks that it is a v=4 (or v=3) record for id.
-- Returns 'missing'; or 'corrupt' and a reason; or 'ok' and the fields.
-- (GET first, TYPE only when it fails: every command a script calls costs
-- a few microseconds, and a sound record needs one.)
local function load(key, id)
  local s = redis.pcall('GET', key)
  if s == false then return 'missing' end
  if type(s) ~= 'string' then
    local kind = redis.call('TYPE', key)['ok']
    if kind == 'hash' then
      -- The records of store versions before format 3 were hashes.
      return 'corrupt', 'record is a hash (format v=2 or earlier, written by an earlier version '
        .. 'of the store), not a format v=4 string: it cannot be read, issue the grant again'
    end
    return 'corrupt', 'key holds a ' .. kind .. ', not a record'
  end
  return parse(s, id)
end

-- A digest of the record's fixed fields (everything but the fields its
-- writes change): the SHA-1 of the bytes they take. The get and issue
-- scripts hand it out; consume and revoke write only when the record still
-- has the digest of the one the library validated.
local function fingerprint(f)
  return redis.sha1hex(string.sub(f.raw, 1, f.fixed_end))
end


-- Reads a fence (an actor's or a run's). A missing fence is generation 0,
-- not stopped. Returns 'ok', the fields and whether the key exists; or
-- 'corrupt' and a reason.
local function fence(key)
  -- HGETALL first, TYPE only when it fails (as load does).
  local flat = redis.pcall('HGETALL', key)
  if flat.err ~= nil then return 'corrupt', 'fence holds a ' .. redis.call('TYPE', key)['ok'] end
  if #flat == 0 then return 'ok', {gen = '0', stopped = '0'}, false end
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

-- Reads the fences of the actor and of `run` in slot. Returns 'ok', the
-- actor's and the run's, and whether each exists; or 'corrupt', a reason
-- and the fence's key.
local function run_fences(slot, run)
  local akey, rkey = actor_fence_key(slot), run_fence_key(slot, run)
  local status, a, a_exists = fence(akey)
  if status ~= 'ok' then return 'corrupt', a, akey end
  local status2, r, r_exists = fence(rkey)
  if status2 ~= 'ok' then return 'corrupt', r, rkey end
  return 'ok', a, r, a_exists, r_exists
end

-- Whether the grant f (in slot) was stopped since it was issued: its run's
-- or its actor's generation moved on. Returns 'ok' and the answer, or
-- 'corrupt', a reason and the fence's key.
local function is_stopped(slot, f)
  local status, a, r = run_fences(slot, f.run)
  if status ~= 'ok' then return status, a, r end
  return 'ok', f.rgen ~= r.gen or f.agen ~= a.gen
end

-- The opening of a list script: KEYS[1] = the index of run ARGV[1] in the
-- slot ARGV[2], which `index_of(slot, run)` names; ARGV[3] = caller's now
-- (ms), ARGV[4] = the most to list. Returns the reply to give at once (a
-- bad key or now, a corrupt fence); or nil and what the list needs: the
-- index, run, slot, now, most, and the actor's and the run's fences (one
-- run, one actor: their fences hold for every entry).
local function open_list(keys, argv, index_of)
  local index, run, slot, now = keys[1], argv[1], argv[2], argv[3]
  if index ~= index_of(slot, run) then
    return redis.error_reply('ERR countersign: the key is not the run index of the slot')
  end
  if not is_u64(now) then return redis.error_reply('ERR countersign: now is not a decimal integer') end
  local fs, a, r = run_fences(slot, run)
  if fs ~= 'ok' then return {'corrupt', a, r} end
  return nil, {index = index, run = run, slot = slot, now = now, most = tonumber(argv[4]),
    a = a, r = r}
end

-- The fences whose generations a new record of `run` (in slot) keeps:
-- nil, the actor's and the run's, and a function that makes the missing
-- ones; or the reply to give at once, 'corrupt' naming the fence, or
-- 'stopped' (a stopped run or actor takes no new record). The check and
-- the write that follows are one step, so a new record racing a stop is
-- either before it (and stopped by it) or refused. A missing fence
-- (generation 0, as it reads) is made once the record is sure to be
-- written, so that it is kept as long as the record: a fence gone before
-- a record that holds its generation would, made again by a stop and gone
-- again after its resume, read generation 0 and bring a stopped record
-- back.
local function fences_for_new(slot, run)
  local status, a, r, a_exists, r_exists = run_fences(slot, run)
  if status ~= 'ok' then return {'corrupt', a, r} end
  if a.stopped == '1' or r.stopped == '1' then return {'stopped'} end
  local function make()
    if not a_exists then redis.call('HSET', actor_fence_key(slot), 'gen', '0', 'stopped', '0') end
    if not r_exists then redis.call('HSET', run_fence_key(slot, run), 'gen', '0', 'stopped', '0') end
  end
  return nil, a, r, make
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

-- Keeps the keys beside grant f (in slot) at least until `at`: its run's
-- live set, the actor's run set and both fences.
local function keep_beside(slot, f, at)
  extend(live_key(slot, f.run), at)
  extend(runs_key(slot), at)
  keep_fence(actor_fence_key(slot), at)
  keep_fence(run_fence_key(slot, f.run), at)
end

-- After issue wrote grant f (in slot, at key): keeps the grant until
-- max(base, server time) + retention (only forward), and the keys beside it
-- at least as long. Returns the grant's new expiry when this moved it,
-- else nil.
local function keep_grant(slot, key, f, base, retention)
  local at = expiry(base, retention)
  local moved = extend(key, at)
  keep_beside(slot, f, at)
  if moved then return at end
  return nil
end

-- Writes `value` at key and keeps it until max(base, server time) +
-- retention or its later expiry (expiry only moves forward; SET alone
-- would drop it). Returns the new expiry when this moved it, else nil.
local function rewrite(key, value, base, retention)
  local kept = expiry_of(key)
  local at = expiry(base, retention)
  local moved = kept == nil or kept == 0 or kept < at
  redis.call('SET', key, value)
  redis.call('PEXPIREAT', key, fmt(moved and at or kept))
  if moved then return at end
  return nil
end

-- Writes record f (in slot, at key) back with these changing fields (nil
-- or false: absent), and keeps it until max(base, server time) +
-- retention or its later expiry (expiry only moves forward; SET alone
-- would drop it). The keys beside it are kept as long when its expiry
-- moved, or `always` (a write that may have created them). Every write
-- that gave the grant its expiry gave them at least as much, so when it
-- does not move they need nothing. Returns the grant's new expiry when it
-- moved, else nil.
local function save(slot, key, f, base, retention, always, state, failed, consumed_at,
    consumed_by, abandoned)
  local value = string.sub(f.raw, 1, f.fixed_end) .. field(state) .. field(failed)
    .. field(consumed_at) .. field(consumed_by) .. field(abandoned)
  local moved = rewrite(key, value, base, retention)
  if moved or always then keep_beside(slot, f, expiry(base, retention)) end
  return moved
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
