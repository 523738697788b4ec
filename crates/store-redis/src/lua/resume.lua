-- resume: KEYS[1] = a fence (an actor's or a run's); ARGV[1] = retention
-- ms. Clears the stopped flag (the generation stays, so grants stopped
-- before stay stopped) and gives the fence back an expiry: the latest its
-- grants need, and at least retention from now. Replies {'resumed'} or
-- {'not_stopped'} (nothing changes).
local key = KEYS[1]
local status, f, exists = fence(key)
if status ~= 'ok' then return {'corrupt', f, key} end
if not exists or f.stopped ~= '1' then return {'not_stopped'} end
redis.call('HSET', key, 'stopped', '0')
redis.call('HDEL', key, 'keep')
local at = expiry(0, tonumber(ARGV[1]))
if f.keep ~= nil and ms(f.keep) > at then at = ms(f.keep) end
redis.call('PEXPIREAT', key, fmt(at))
return {'resumed'}
