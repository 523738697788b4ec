-- countersign proposal records, shared by the proposal scripts (it follows
-- the grant prelude and uses its helpers). Proposal record format 2 (format
-- 1 records, the previous version's, are read and kept as format 1).
-- A proposal lives in its actor's slot, beside the actor's grants and
-- fences, so that approving it and issuing its grant is one script:
--   <slot>:proposal:<id>   a proposal (string: one record, see below)
--   <slot>:pending:<run>   the run's undecided proposals (zset, every score
--                          0, member `<proposed_at as 20 digits>:<id>`: the
--                          members sort by proposed_at, then by id)
--
-- A record is a format byte, the length of its head (4 bytes, big endian),
-- the head, then the screenshot as one field (ABSENT without one). The
-- head is the P_FIELDS in order, in the grant record's field encoding. Its
-- fields up to P_LAST_FIXED never change (the fingerprint covers them); a
-- decision rewrites the rest. A format 1 head has every field but
-- `element` (it binds no element). Heads a script replies with are tagged:
-- the record's format byte, then the head. The screenshot comes last and outside the
-- head so that a list, or the read before a decision, takes the head alone
-- (GETRANGE) and never copies megabytes of screenshots.

local P_FORMAT = 2
local P_OLD_FORMAT = 1
local P_FIELDS = {
  'id', 'actor', 'run', 'url', 'action', 'digest', 'proposed_at', 'expires_at',
  'session_id', 'target_id', 'page_revision', 'target_found', 'element', 'rgen', 'agen',
  'state', 'approval_id', 'decided_by', 'decided_at',
}
-- The last field written at propose: it and every field before it never
-- change.
local P_LAST_FIXED = 'agen'
local P_OPTIONAL = {
  session_id = true, target_id = true, page_revision = true, target_found = true,
  element = true, approval_id = true, decided_by = true, decided_at = true,
}
-- Proposal states, one byte each.
local PENDING, APPROVED, DENIED = 'p', 'a', 'd'
local MAX_SCREENSHOT = 2097152
local PNG_SIGNATURE = '\137PNG\r\n\26\n'
-- Where the head starts: after the format byte and its 4-byte length.
local HEAD_AT = 6

local function proposal_key(slot, id) return slot .. ':proposal:' .. id end
local function pending_key(slot, run) return slot .. ':pending:' .. run end

-- The member of proposal p in its run's pending index.
local function pending_member(p)
  return string.rep('0', 20 - #p.proposed_at) .. p.proposed_at .. ':' .. p.id
end

-- The id a pending index member names (nil when it is not a member).
local function member_id(member)
  if #member < 22 or string.find(string.sub(member, 1, 21), '^[0-9]+:$') == nil then
    return nil
  end
  return string.sub(member, 22)
end

local function u32_bytes(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
end

-- The head length stored at bytes 2..5 of s, or nil when s is shorter.
local function head_length(s)
  local a, b, c, d = string.byte(s, 2, 5)
  if d == nil then return nil end
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- The record of format `format` of `head` and the screenshot field `tail`.
local function proposal_record(format, head, tail)
  return string.char(format) .. u32_bytes(#head) .. head .. tail
end

-- Proposal p's head as replies carry it: its format byte, then the head.
local function tagged_head(p)
  return string.char(p.format) .. p.head
end

local function is_proposal_format(version)
  return version == P_FORMAT or version == P_OLD_FORMAT
end

-- Reads a proposal head of format `format` for id (nil: any id). Returns
-- 'ok' and the fields by name (`head` the bytes, `format`, `fixed_end`
-- where its fixed fields end); or
-- 'corrupt' and a reason. A pending proposal's decision fields are
-- checked exactly as strictly as the library reads them: a script decides
-- only a pending proposal, so it never writes to one the library refuses.
local function parse_head(head, id, format)
  local p, pos = {head = head, format = format}, 1
  for _, name in ipairs(P_FIELDS) do
    if name ~= 'element' or format == P_FORMAT then
      local value, after = read_field(head, pos)
      if value == nil then return 'corrupt', 'proposal record is cut short at ' .. name end
      if value == false then
        if not P_OPTIONAL[name] then return 'corrupt', 'proposal record lacks ' .. name end
      else
        p[name] = value
      end
      pos = after
      if name == P_LAST_FIXED then p.fixed_end = pos - 1 end
    end
  end
  if pos ~= #head + 1 then return 'corrupt', 'proposal head has bytes after its last field' end
  if id ~= nil and p.id ~= id then return 'corrupt', 'id field does not match the key' end
  if #p.digest ~= DIGEST_BYTES then return 'corrupt', 'digest is not 32 bytes' end
  if not is_u64(p.proposed_at) or not is_u64(p.expires_at) then
    return 'corrupt', 'timestamp is not a decimal integer'
  end
  if not is_u64(p.rgen) or not is_u64(p.agen) then
    return 'corrupt', 'generation is not a decimal integer'
  end
  local page = p.session_id ~= nil
  if (p.target_id ~= nil) ~= page or (p.page_revision ~= nil) ~= page
      or (p.target_found ~= nil) ~= page then
    return 'corrupt', 'page fields must be set together'
  end
  if page and p.target_found ~= '0' and p.target_found ~= '1' then
    return 'corrupt', 'target_found is not 0 or 1'
  end
  if p.element ~= nil and not page then return 'corrupt', 'element without a page' end
  if p.state == PENDING then
    if p.approval_id ~= nil or p.decided_by ~= nil or p.decided_at ~= nil then
      return 'corrupt', 'pending proposal has decision fields'
    end
  elseif p.state == APPROVED or p.state == DENIED then
    -- Nothing is written to a decided proposal; these checks keep a list
    -- from skipping one the library would refuse to read.
    if (p.state == APPROVED) ~= is_token(p.approval_id) or not is_u64(p.decided_at) then
      return 'corrupt', 'decision fields do not match the state'
    end
    if p.decided_by ~= nil and (#p.decided_by == 0 or #p.decided_by > 256
        or string.find(p.decided_by, '[%z\1-\31\127]') ~= nil) then
      return 'corrupt', 'decided_by is not an approver id'
    end
  else
    return 'corrupt', 'unknown proposal state'
  end
  return 'ok', p
end

-- Reads record s as a proposal record for id: head and screenshot.
-- Returns 'ok' and the fields (`raw` the record, `tail` its screenshot
-- field); or 'corrupt' and a reason.
local function parse_proposal(s, id)
  if #s == 0 then return 'corrupt', 'proposal record is empty' end
  local format = string.byte(s, 1)
  if not is_proposal_format(format) then
    return 'corrupt', 'unsupported proposal record format ' .. format
  end
  local n = head_length(s)
  if n == nil or HEAD_AT + n > #s then return 'corrupt', 'proposal record is cut short' end
  local status, p = parse_head(string.sub(s, HEAD_AT, HEAD_AT + n - 1), id, format)
  if status ~= 'ok' then return status, p end
  local shot, after = read_field(s, HEAD_AT + n)
  if shot == nil or after ~= #s + 1 then
    return 'corrupt', 'proposal record does not end with one screenshot field'
  end
  if shot ~= false then
    if p.session_id == nil then return 'corrupt', 'screenshot without a page' end
    if #shot > MAX_SCREENSHOT or string.sub(shot, 1, 8) ~= PNG_SIGNATURE then
      return 'corrupt', 'screenshot is not a png of at most 2 MiB'
    end
  end
  p.raw = s
  p.tail = string.sub(s, HEAD_AT + n)
  return 'ok', p
end

-- Reads the proposal at key. Returns 'missing'; or 'corrupt' and a reason;
-- or 'ok' and the fields.
local function load_proposal(key, id)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 'missing' end
  if kind ~= 'string' then return 'corrupt', 'key holds a ' .. kind .. ', not a proposal' end
  return parse_proposal(redis.call('GET', key), id)
end

-- Reads only the head of the proposal at key (and checks that a
-- screenshot field can follow it): what a list and the read before a
-- decision need. The decision scripts read the whole record.
local function load_head(key, id)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 'missing' end
  if kind ~= 'string' then return 'corrupt', 'key holds a ' .. kind .. ', not a proposal' end
  local start = redis.call('GETRANGE', key, 0, HEAD_AT - 2)
  if #start == 0 then return 'corrupt', 'proposal record is empty' end
  local format = string.byte(start, 1)
  if not is_proposal_format(format) then
    return 'corrupt', 'unsupported proposal record format ' .. format
  end
  local n = head_length(start)
  if n == nil or redis.call('STRLEN', key) < HEAD_AT + n then
    return 'corrupt', 'proposal record is cut short'
  end
  local head = ''
  if n > 0 then head = redis.call('GETRANGE', key, HEAD_AT - 1, HEAD_AT + n - 2) end
  return parse_head(head, id, format)
end

-- The digest of a proposal's fixed fields: the SHA-1 of the bytes they
-- take in its head. The get script hands it out; a decision is written
-- only to a record that still has the digest the library validated.
local function proposal_fingerprint(p)
  return redis.sha1hex(string.sub(p.head, 1, p.fixed_end))
end

-- Whether proposal p was stopped since it was made, by the actor's fence
-- a and its run's fence r: a generation moved on, or a fence is stopped now.
local function stopped_by(p, a, r)
  return p.rgen ~= r.gen or p.agen ~= a.gen or a.stopped == '1' or r.stopped == '1'
end

-- Whether proposal p (in slot) was stopped since it was made. Returns 'ok'
-- and the answer, or 'corrupt', a reason and the fence's key.
local function proposal_stopped(slot, p)
  local status, a, r = run_fences(slot, p.run)
  if status ~= 'ok' then return status, a, r end
  return 'ok', stopped_by(p, a, r)
end

-- Writes the decision into proposal p at key: its fixed fields and its
-- screenshot stay as they are. The record keeps its expiry, moved forward
-- to `keep_at` when that is later (nil: unchanged); a record without
-- expiry keeps none. Returns the new expiry when this moved it, else nil.
local function save_decision(key, p, state, approval_id, by, at, keep_at)
  local head = string.sub(p.head, 1, p.fixed_end) .. field(state) .. field(approval_id)
    .. field(by) .. field(at)
  local kept = expiry_of(key)
  redis.call('SET', key, proposal_record(p.format, head, p.tail))
  if kept == nil or kept == 0 then return nil end
  if keep_at ~= nil and keep_at > kept then
    redis.call('PEXPIREAT', key, fmt(keep_at))
    return keep_at
  end
  redis.call('PEXPIREAT', key, fmt(kept))
  return nil
end

-- The library's call names the proposal key by the slot prefix and the id.
local function check_proposal_key(key, slot, id)
  if key ~= proposal_key(slot, id) then
    return redis.error_reply('ERR countersign: the key is not the proposal key of the slot and id')
  end
  return nil
end
