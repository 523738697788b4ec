-- issue: KEYS[1] = grant key; ARGV[1] = issue token (fresh per issue call),
-- ARGV[2] = retention ms, ARGV[3] = max(expires_at, issued_at),
-- ARGV[4..] = field/value pairs.
-- Never overwrites. A key holding this call's own token is a resent copy of
-- this same call (the first reply was lost) and answers issued again.
local key = KEYS[1]
if redis.call('EXISTS', key) == 1 then
  if redis.call('TYPE', key)['ok'] == 'hash'
    and redis.call('HGET', key, 'issue_token') == ARGV[1] then
    return {'issued'}
  end
  return {'exists'}
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', key, unpack(fields))
keep_until(key, ms(ARGV[3]), tonumber(ARGV[2]))
return {'issued'}
