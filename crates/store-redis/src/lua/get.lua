-- get: KEYS[1] = grant key; ARGV[1] = id. Reads only; a found record comes
-- with its fingerprint.
local status, f, flat = load(KEYS[1], ARGV[1])
if status == 'missing' then return {'missing'} end
if status == 'corrupt' then return {'corrupt', f} end
return {'found', flat, fingerprint(flat)}
