-- oplog record: KEYS[1] = the log's stream, KEYS[2] = the run's index
-- stream, KEYS[3] = the operation's key (all in the log's one slot);
-- ARGV[1] = most records kept, ARGV[2] = retention ms, ARGV[3..] = the
-- record's field/value pairs. One record per operation id: a resend of a
-- recorded operation adds nothing and answers 'exists'.
if redis.call('EXISTS', KEYS[3]) == 1 then return {'exists'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max, retention = ARGV[1], tonumber(ARGV[2])
local oldest = string.format('%d', math.max(0, now - retention))
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', max, '*', unpack(fields))
redis.call('XTRIM', KEYS[1], 'MINID', oldest)
redis.call('PEXPIRE', KEYS[1], retention)
redis.call('XADD', KEYS[2], 'MAXLEN', max, '*', 'e', id)
redis.call('XTRIM', KEYS[2], 'MINID', oldest)
redis.call('PEXPIRE', KEYS[2], retention)
redis.call('SET', KEYS[3], id, 'PX', retention)
return {'recorded', id}
