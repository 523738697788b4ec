-- oplog read: KEYS[1] = the log's stream; KEYS[2] = a run's index stream
-- (ARGV[1] = 'run') or an operation's key (ARGV[1] = 'operation'). Reads
-- only. Replies with the log entries still held, oldest first, each as
-- {entry id, {field, value, ...}}; an index entry whose record was trimmed
-- is skipped.
local ids = {}
if ARGV[1] == 'run' then
  for _, entry in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do
    local fields = entry[2]
    if fields[1] == 'e' then ids[#ids + 1] = fields[2] end
  end
elseif ARGV[1] == 'operation' then
  local id = redis.call('GET', KEYS[2])
  if id then ids[1] = id end
else
  return redis.error_reply('ERR countersign: unknown oplog read')
end
local found = {}
for _, id in ipairs(ids) do
  local entry = redis.call('XRANGE', KEYS[1], id, id)
  if #entry == 1 then found[#found + 1] = entry[1] end
end
return found
