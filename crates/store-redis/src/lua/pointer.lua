-- pointer: KEYS[1] = {prefix}:id:{<id>}, which names the slot of grant
-- <id> by its actor's tag. It holds the tag's 16 raw bytes (a pointer an
-- earlier version wrote holds its 32 lower-case hex characters, and reads
-- the same); tags in arguments and replies are hex. ARGV[1] = mode:
-- - 'claim', ARGV[2] = tag, ARGV[3] = max(expires_at, issued_at), ARGV[4] =
--   retention ms: written unless the key exists (ids are unique over all
--   actors, and nothing is ever overwritten); replies 'claimed', 'same'
--   (it already names this tag) or 'taken' (anything else is there);
-- - 'read': replies {'found', tag}, {'missing'} or {'corrupt', reason};
-- - 'keep', ARGV[2] = tag, ARGV[3] = absolute ms: moves the expiry forward
--   to the grant's, when it still names the tag;
-- - 'release', ARGV[2] = tag: deletes it when it names the tag (an issue
--   refused as stopped stores nothing).
local key, mode = KEYS[1], ARGV[1]
local kind = redis.call('TYPE', key)['ok']
local value, bad = nil, nil
if kind == 'string' then
  local stored = redis.call('GET', key)
  if #stored == 16 then
    value = to_hex(stored)
  elseif #stored == 32 and string.find(stored, '^[0-9a-f]+$') ~= nil then
    value = stored
  else
    bad = 'pointer is not an actor tag'
  end
elseif kind ~= 'none' then
  bad = 'key holds a ' .. kind .. ', not a pointer'
end
if mode == 'claim' then
  if kind == 'none' then
    if #ARGV[2] ~= 32 or string.find(ARGV[2], '^[0-9a-f]+$') == nil then
      return redis.error_reply('ERR countersign: the tag is not 32 lower-case hex characters')
    end
    redis.call('SET', key, from_hex(ARGV[2]))
    keep_until(key, ms(ARGV[3]), tonumber(ARGV[4]))
    return {'claimed'}
  end
  if value == ARGV[2] then return {'same'} end
  return {'taken'}
elseif mode == 'read' then
  if bad ~= nil then return {'corrupt', bad} end
  if value == nil then return {'missing'} end
  return {'found', value}
elseif mode == 'keep' then
  if value == ARGV[2] then extend(key, ms(ARGV[3])) end
  return {'kept'}
elseif mode == 'release' then
  if value == ARGV[2] then
    redis.call('DEL', key)
    return {'released'}
  end
  return {'kept'}
end
return redis.error_reply('ERR countersign: unknown pointer mode')
