"""The Lua scripts that read a session (see ``_redis_lua`` for the keys and the common
head of arguments). A read refreshes the session's expiry when the TTL policy says
reads do; otherwise it writes nothing."""

from __future__ import annotations

from typing import Final

from ._redis_lua import HEAD, script

READ_ITEMS: Final = script(
    "read_items",
    HEAD
    + r"""
-- ARGV[2]: how many of the newest ('' for all).
local r, err = for_read()
if err then return err end
if not r then return {'none'} end
if ARGV[2] == '' then return rows(redis.call('ZRANGE', Z, 0, -1, 'WITHSCORES'), false) end
local n = tonumber(ARGV[2])
if n == 0 then return {'ok'} end
local zs = redis.call('ZREVRANGE', Z, 0, n - 1, 'WITHSCORES')
local up = {}
for i = #zs - 1, 1, -2 do up[#up + 1] = zs[i]; up[#up + 1] = zs[i + 1] end
return rows(up, false)
""",
    writes=False,
)

READ_ENTRIES: Final = script(
    "read_entries",
    HEAD
    + r"""
-- ARGV[2] the position ('' from the end), ARGV[3] the limit, ARGV[4] '1' walking back.
local r, err = for_read()
if err then return err end
if not r then return {'none'} end
local lim = tonumber(ARGV[3]) + 1
local zs
if ARGV[4] == '1' then
  local hi = '+inf'
  if ARGV[2] ~= '' then hi = '(' .. ARGV[2] end
  zs = redis.call('ZREVRANGEBYSCORE', Z, hi, '-inf', 'WITHSCORES', 'LIMIT', 0, lim)
else
  local lo = '-inf'
  if ARGV[2] ~= '' then lo = '(' .. ARGV[2] end
  zs = redis.call('ZRANGEBYSCORE', Z, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, lim)
end
return rows(zs, true)
""",
    writes=False,
)

READ_META: Final = script(
    "read_meta",
    HEAD
    + r"""
-- ARGV[2] '1': the state too.
local r, err = for_read()
if err then return err end
if not r then return {'none'} end
local out = {'ok', r.u, r.ca, r.ua, r.ea, r.md, r.ls, r.n, r.sv}
if ARGV[2] == '1' then out[#out + 1] = redis.call('HGET', M, 'st') or '' end
return out
""",
    writes=False,
)

GET_COUNTS: Final = script(
    "get_counts",
    HEAD
    + r"""
-- ARGV[2] 'all', or 'some' followed by the message ids.
local r, err = for_read()
if err then return err end
if not r then return {'none'} end
local ids = {}
if ARGV[2] == 'all' then
  ids = redis.call('ZRANGE', Z, 0, -1)
else
  for i = 3, #ARGV do
    if redis.call('ZSCORE', Z, ARGV[i]) then ids[#ids + 1] = ARGV[i] end
  end
end
local out = {'ok'}
for i = 1, #ids, 4000 do
  local part = {unpack(ids, i, math.min(i + 3999, #ids))}
  local cs = redis.call('HMGET', C, unpack(part))
  for j = 1, #part do out[#out + 1] = part[j]; out[#out + 1] = cs[j] or '' end
end
return out
""",
    writes=False,
)
