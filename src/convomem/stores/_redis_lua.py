"""The Lua scripts of the Redis store that write a session (the reads are in
``_redis_lua_reads``, the index scripts in ``_redis_lua_index``): each session operation
is one script, so it is atomic (Redis runs a script alone) and costs one round trip.

A session's keys share one hash tag, so a script touches a single slot and runs
unchanged on Redis Cluster. Session scripts take ``KEYS[1]``, the meta key (the others
are the same name with another last part: same tag, same slot; fewer arguments are
cheaper to send) and in ``ARGV[1]`` a common head, one value per line: ``now`` (the
caller's clock, epoch seconds), ``user``
(``''``: an administrative handle), ``new_ea`` (the expiry a write or read sets; ``''``:
none), ``on_write``, ``on_read`` (``'1'``/``'0'``: what refreshes the expiry) and
``order`` (the listing order a creation records; ``''``: the script may not create and
answers ``{'create'}`` instead, so the caller first registers the session in its
tenant's index). Replies are arrays whose first element is a status.

The layout: ``meta`` a hash (``u`` owner, ``ca``/``ua``/``ea`` created, updated,
expires, ``md`` metadata, ``ns`` next seq, ``ls`` last live seq, ``n`` count, ``sv`` state
version, ``st`` state, ``o`` order); ``log`` a sorted set of message ids scored by seq;
``data`` and ``counts`` hashes by message id.
"""

from __future__ import annotations

from typing import Final

from .statements import Script, script

__all__ = ["Script", "script"]


HEAD: Final = r"""
local function split(s)
  local out, i = {}, 1
  while true do
    local j = string.find(s, '\n', i, true)
    if not j then out[#out + 1] = string.sub(s, i); return out end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

local M = KEYS[1]
local base = string.sub(M, 1, -2)
local Z, D, C, L = base .. 'z', base .. 'd', base .. 'c', base .. 'lock'
local H = split(ARGV[1])
local NOW = H[1]
local now = tonumber(NOW)
local user, new_ea, order = H[2], H[3], H[6]
local on_write, on_read = H[4] == '1', H[5] == '1'

local function bulk(cmd, key, items)
  for i = 1, #items, 4000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 3999, #items)))
  end
end

local function meta()
  local v = redis.call('HMGET', M, 'u', 'ca', 'ua', 'ea', 'md', 'ns', 'ls', 'n', 'sv')
  if not v[6] then return nil, false end
  local r = {u = v[1] or '', ca = v[2], ua = v[3], ea = v[4] or '', md = v[5] or '{}',
    ns = tonumber(v[6]), ls = tonumber(v[7]), n = tonumber(v[8]), sv = tonumber(v[9])}
  if r.ea ~= '' and tonumber(r.ea) <= now then return nil, true end
  return r, false
end

local function expire_all(ea, had)
  if ea ~= '' then
    local ms = math.ceil((tonumber(ea) - now) * 1000)
    if ms < 1 then ms = 1 end
    for _, k in ipairs({M, Z, D, C}) do redis.call('PEXPIRE', k, ms) end
  elseif had ~= '' then
    for _, k in ipairs({M, Z, D, C}) do redis.call('PERSIST', k) end
  end
end

local function for_read()
  local r = meta()
  if not r then return nil end
  if user ~= '' and r.u ~= user then return nil, {'owner'} end
  if on_read then
    local had = r.ea
    r.ea = new_ea
    redis.call('HSET', M, 'ea', new_ea)
    expire_all(new_ea, had)
  end
  return r
end

local function for_write(create)
  if redis.call('EXISTS', L) == 1 then return nil, {'locked', redis.call('PTTL', L)} end
  local r, expired = meta()
  if expired then redis.call('DEL', M, Z, D, C) end
  if r then
    if user ~= '' and r.u ~= user then return nil, {'owner'} end
    return r
  end
  if not create then return nil end
  if order == '' then return nil, {'create'} end
  r = {u = user, ca = NOW, ua = NOW, ea = new_ea, md = '{}', ns = 1, ls = 0, n = 0, sv = 0}
  redis.call('HSET', M, 'u', user, 'ca', NOW, 'ua', NOW, 'ea', new_ea, 'md', '{}',
    'ns', 1, 'ls', 0, 'n', 0, 'sv', 0, 'o', order)
  return r
end

local function touch(r, f)
  local had = r.ea
  f[#f + 1] = 'ua'; f[#f + 1] = NOW
  if on_write then r.ea = new_ea; f[#f + 1] = 'ea'; f[#f + 1] = new_ea end
  redis.call('HSET', M, unpack(f))
  expire_all(r.ea, had)
end

local function set_tail(r, removed, f)
  local top = redis.call('ZREVRANGE', Z, 0, 0, 'WITHSCORES')
  f[#f + 1] = 'ls'; f[#f + 1] = top[2] or 0
  f[#f + 1] = 'n'; f[#f + 1] = r.n - removed
  touch(r, f)
end

local function rows(zs, with_counts)
  local out = {'ok'}
  local ids = {}
  for i = 1, #zs, 2 do ids[#ids + 1] = zs[i] end
  for i = 1, #ids, 4000 do
    local part = {unpack(ids, i, math.min(i + 3999, #ids))}
    local ds = redis.call('HMGET', D, unpack(part))
    local cs = with_counts and redis.call('HMGET', C, unpack(part)) or {}
    for j = 1, #part do
      local k = i + j - 1
      out[#out + 1] = tonumber(zs[2 * k]); out[#out + 1] = part[j]
      out[#out + 1] = ds[j] or ''; out[#out + 1] = cs[j] or ''
    end
  end
  return out
end
"""

APPEND: Final = script(
    "append",
    HEAD
    + r"""
-- ARGV[2]: expected_seq, expected_version, has_state, count, extras (one per line);
-- ARGV[3] the state; then each message framed as '<byte length of id>:<id><data>';
-- then per extra: its message's
-- index (from 0), its counts ('' for none) and alt ('' or stored bytes the caller found
-- equal to the data). Replies the seq of the batch's last message (a number: the common
-- reply, the cheapest).
local P = split(ARGV[2])
local eseq, ever, has_state, state = P[1], P[2], P[3] == '1', ARGV[3]
local count, extras = tonumber(P[4]), tonumber(P[5])
local r, err = for_write(false)
if err then return err end
local last = r and r.ls or 0
local version = r and r.sv or 0
local seq_ok = eseq == '' or tonumber(eseq) == last
local ver_ok = ever == '' or tonumber(ever) == version
if not r or (count == 0 and not has_state) then
  if not seq_ok then return {'cas', 'seq', eseq, last} end
  if not ver_ok then return {'cas', 'state_version', ever, version} end
  if r or (count == 0 and not has_state) then return last end
  r, err = for_write(true)
  if err then return err end
end
local ids, datas, counts, alts = {}, {}, {}, {}
for i = 1, count do
  local a = ARGV[3 + i]
  local c = string.find(a, ':', 1, true)
  local n = tonumber(string.sub(a, 1, c - 1))
  ids[i] = string.sub(a, c + 1, c + n)
  datas[i] = string.sub(a, c + n + 1)
end
for j = 0, extras - 1 do
  local b = 4 + count + j * 3
  local i = tonumber(ARGV[b]) + 1
  counts[i] = ARGV[b + 1]
  alts[i] = ARGV[b + 2]
end
local scores = {}
for i = 1, count, 4000 do
  local part = redis.call('ZMSCORE', Z, unpack(ids, i, math.min(i + 3999, count)))
  for j = 1, #part do scores[i + j - 1] = part[j] end
end
local new, check = {}, {}
local replay = last
for i = 1, count do
  local s = scores[i]
  if not s then
    new[#new + 1] = i
  else
    local have = redis.call('HGET', D, ids[i])
    local alt = alts[i] or ''
    if have ~= datas[i] and have ~= alt then
      if alt ~= '' then return {'conflict', ids[i], tonumber(s), 'other', ''} end
      check[#check + 1] = i - 1; check[#check + 1] = tonumber(s); check[#check + 1] = have or ''
    elseif #new > 0 then
      return {'conflict', ids[i], tonumber(s), 'after', ids[new[1]]}
    end
    replay = tonumber(s)
  end
end
if #check > 0 then
  table.insert(check, 1, 'check')
  return check
end
local same_state = not has_state or redis.call('HGET', M, 'st') == state
if #new == 0 and same_state then return replay end
if not seq_ok then return {'cas', 'seq', eseq, last} end
if not ver_ok then return {'cas', 'state_version', ever, version} end
local start = r.ns
local zs, ds, cs = {}, {}, {}
for j, i in ipairs(new) do
  local id = ids[i]
  zs[#zs + 1] = start + j - 1; zs[#zs + 1] = id
  ds[#ds + 1] = id; ds[#ds + 1] = datas[i]
  if counts[i] and counts[i] ~= '' then cs[#cs + 1] = id; cs[#cs + 1] = counts[i] end
end
if #zs > 0 then bulk('ZADD', Z, zs); bulk('HSET', D, ds) end
if #cs > 0 then bulk('HSET', C, cs) end
local nn = #new
local new_last = last
if nn > 0 then new_last = start + nn - 1 end
local f = {'ns', start + nn, 'ls', new_last, 'n', r.n + nn}
if has_state then f[#f + 1] = 'st'; f[#f + 1] = state; f[#f + 1] = 'sv'; f[#f + 1] = r.sv + 1 end
touch(r, f)
return new_last
""",
    writes=True,
)

POP: Final = script(
    "pop",
    HEAD
    + r"""
-- ARGV[2], ARGV[3]: the id and seq the caller read as the newest and could decode;
-- ARGV[4] the call's token: a retry of a pop that was applied (its reply lost) answers
-- 'ok' instead of popping again.
local r, err = for_write(false)
if err then return err end
if not r then return {'none'} end
if redis.call('HGET', M, 'wt') == ARGV[4] then return {'ok'} end
local top = redis.call('ZREVRANGE', Z, 0, 0, 'WITHSCORES')
if #top == 0 then return {'none'} end
local id, seq = top[1], tonumber(top[2])
if ARGV[2] ~= id or tonumber(ARGV[3]) ~= seq then
  return {'peek', seq, id, redis.call('HGET', D, id) or ''}
end
redis.call('ZREM', Z, id)
redis.call('HDEL', D, id)
redis.call('HDEL', C, id)
set_tail(r, 1, {'wt', ARGV[4]})
return {'ok'}
""",
    writes=True,
)

TRUNCATE: Final = script(
    "truncate",
    HEAD
    + r"""
local r, err = for_write(false)
if err then return err end
local keep = tonumber(ARGV[2])
if not r or keep >= r.n then return {'ok'} end
local cut = 0
if keep > 0 then cut = tonumber(redis.call('ZRANGE', Z, keep - 1, keep - 1, 'WITHSCORES')[2]) end
local ids = redis.call('ZRANGEBYSCORE', Z, '(' .. cut, '+inf')
bulk('HDEL', D, ids)
bulk('HDEL', C, ids)
redis.call('ZREMRANGEBYSCORE', Z, '(' .. cut, '+inf')
set_tail(r, #ids, {})
return {'ok'}
""",
    writes=True,
)

CLEAR: Final = script(
    "clear",
    HEAD
    + r"""
local r, err = for_write(false)
if err then return err end
if not r then return {'ok'} end
local removed = redis.call('ZCARD', Z)
redis.call('DEL', Z, D, C)
local f = {}
if redis.call('HEXISTS', M, 'st') == 1 then
  redis.call('HDEL', M, 'st')
  f = {'sv', r.sv + 1}
end
set_tail(r, removed, f)
return {'ok'}
""",
    writes=True,
)

SAVE_STATE: Final = script(
    "save_state",
    HEAD
    + r"""
-- ARGV[2] '1' with a state (ARGV[3]) or '0' for none; ARGV[4] the expected version;
-- ARGV[5] the call's token: a retry of a save that was applied answers its version.
local r, err = for_write(false)
if err then return err end
if r and redis.call('HGET', M, 'wt') == ARGV[5] then
  return {'ok', tonumber(redis.call('HGET', M, 'wv'))}
end
local ev = tonumber(ARGV[4])
local v = r and r.sv or 0
if v ~= ev then return {'cas', 'state_version', ev, v} end
if not r then
  r, err = for_write(true)
  if err then return err end
end
local f = {'sv', r.sv + 1, 'wt', ARGV[5], 'wv', r.sv + 1}
if ARGV[2] == '1' then
  f[#f + 1] = 'st'; f[#f + 1] = ARGV[3]
else
  redis.call('HDEL', M, 'st')
end
touch(r, f)
return {'ok', r.sv + 1}
""",
    writes=True,
)

SET_METADATA: Final = script(
    "set_metadata",
    HEAD
    + r"""
local r, err = for_write(true)
if err then return err end
touch(r, {'md', ARGV[2]})
return {'ok'}
""",
    writes=True,
)

SET_COUNTS: Final = script(
    "set_counts",
    HEAD
    + r"""
-- ARGV[2..]: message id, counts JSON, ...; merged into the stored counts.
local r, err = for_write(false)
if err then return err end
for i = 2, #ARGV, 2 do
  if not r or not redis.call('ZSCORE', Z, ARGV[i]) then return {'missing', ARGV[i]} end
end
for i = 2, #ARGV, 2 do
  local ok, old = pcall(cjson.decode, redis.call('HGET', C, ARGV[i]) or '{}')
  if not ok or type(old) ~= 'table' then old = {} end
  for k, n in pairs(cjson.decode(ARGV[i + 1])) do old[k] = n end
  if next(old) == nil then
    redis.call('HSET', C, ARGV[i], '{}')
  else
    redis.call('HSET', C, ARGV[i], cjson.encode(old))
  end
end
if r then expire_all(r.ea, r.ea) end
return {'ok'}
""",
    writes=True,
)
