-- get: KEYS[1] = grant key; ARGV[1] = id, ARGV[2] = the actor's slot
-- prefix. Reads only. A found record comes with the fingerprint of its
-- fixed fields and whether its run or actor was stopped since it was issued.
local err = check_key(KEYS[1], ARGV[2], ARGV[1])
if err then return err end
local status, f = load(KEYS[1], ARGV[1])
if status == 'missing' then return {'missing'} end
if status == 'corrupt' then return {'corrupt', f} end
local fs, stopped, fkey = is_stopped(ARGV[2], f)
if fs ~= 'ok' then return {'corrupt', stopped, fkey} end
return {'found', f.raw, fingerprint(f), meta(stopped, nil)}
