-- countersign record helpers, shared by every script. Record format v=1.
-- A script touches only KEYS[1], the grant's own hash (one slot in a cluster).

local MAX_MS = 9007199254740991 -- 2^53 - 1: largest integer a Lua number holds exactly

local KNOWN = {
  v = true, id = true, actor = true, run = true, url = true, action = true,
  digest = true, issued_at = true, expires_at = true, note = true,
  page_revision = true, operation_id = true, session_id = true, state = true,
  consumed_at = true, consumed_by = true, issue_token = true,
  abandoned = true,
}
local REQUIRED = {
  'v', 'id', 'actor', 'run', 'url', 'action', 'digest', 'issued_at',
  'expires_at', 'state', 'issue_token',
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

-- Keeps the record until max(base, server time) + retention, or later if it
-- already was: expiry only ever moves forward.
local function keep_until(key, base, retention)
  local now = server_ms()
  local at = math.max(base, now) + retention
  if at > MAX_MS then at = MAX_MS end
  local ttl = redis.call('PTTL', key)
  if ttl > 0 and now + ttl > at then at = now + ttl end
  redis.call('PEXPIREAT', key, string.format('%d', at))
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

-- Reads the grant at key and checks that it is a v=1 record for id.
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
  if f.v ~= '1' then return 'corrupt', 'unsupported format version' end
  if f.id ~= id then return 'corrupt', 'id field does not match the key' end
  if #f.digest ~= 64 or string.find(f.digest, '^[0-9a-f]+$') == nil then
    return 'corrupt', 'digest is not 64 lower-case hex characters'
  end
  if not is_uint(f.issued_at) or not is_uint(f.expires_at) then
    return 'corrupt', 'timestamp is not a decimal integer'
  end
  local a = f.abandoned
  if a ~= nil and (string.find(a, '^[A-Za-z0-9_%- ]+$') == nil or string.find(a, '^ ') ~= nil
      or string.find(a, ' $') ~= nil or string.find(a, '  ', 1, true) ~= nil) then
    return 'corrupt', 'abandoned is not a list of attempt ids'
  end
  if f.state == 'consumed' then
    if not is_uint(f.consumed_at) or f.consumed_by == nil then
      return 'corrupt', 'consumed record lacks consumed_at or consumed_by'
    end
  elseif f.state == 'active' or f.state == 'revoked' then
    if f.consumed_at ~= nil or f.consumed_by ~= nil then
      return 'corrupt', 'unconsumed record has consumed fields'
    end
  else
    return 'corrupt', 'unknown state'
  end
  return 'ok', f, flat
end

-- A digest of the whole record (the flat HGETALL reply): names sorted, each
-- name and value prefixed by its length, so two different records never
-- hash the same text. The get script hands it out with the record; consume
-- and revoke write only when the record still has the digest of the one
-- the library read and validated.
local function fingerprint(flat)
  local names, values = {}, {}
  for i = 1, #flat, 2 do
    names[#names + 1] = flat[i]
    values[flat[i]] = flat[i + 1]
  end
  table.sort(names)
  local parts = {}
  for _, name in ipairs(names) do
    local value = values[name]
    parts[#parts + 1] = #name .. ':' .. name .. #value .. ':' .. value
  end
  return redis.sha1hex(table.concat(parts))
end
