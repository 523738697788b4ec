-- standing_get: KEYS[1] = the standing grant's key; ARGV[1] = id, ARGV[2] =
-- the actor's slot prefix. Reads only. A found record comes with the
-- fingerprint of its fixed fields and whether its run or actor was stopped
-- since it was issued.
local reply, g, stopped = open_standing(KEYS, ARGV, nil)
if reply ~= nil then
  if reply[1] == 'unknown' then return {'missing'} end
  return reply
end
return {'found', g.raw, standing_fingerprint(g), meta(stopped, nil)}
