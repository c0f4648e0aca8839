"""The Lua scripts over a tenant's index of sessions, and deleting a session whole.

A tenant's index keys share the tenant's hash tag, not a session's, so these run apart
from the session scripts (see ``_redis_admin`` for the order that keeps them right)."""

from __future__ import annotations

from typing import Final

from ._redis_lua import script

DELETE: Final = script(
    "delete",
    r"""
-- KEYS: meta, log, data, counts. ARGV: now, user, mode: 'check' (delete_session: the
-- owner must match when the session is visible), 'erase' (only when user owns it),
-- 'expired' (only when it has expired).
local M, Z, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, user, mode = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local v = redis.call('HMGET', M, 'u', 'ea', 'o', 'ns')
if not v[4] then return {'none'} end
local owner, ea = v[1] or '', v[2] or ''
local visible = ea == '' or tonumber(ea) > now
if mode == 'erase' then
  if owner ~= user then return {'skip'} end
elseif mode == 'expired' then
  if visible then return {'skip'} end
elseif visible and user ~= '' and owner ~= user then
  return {'owner'}
end
redis.call('DEL', M, Z, D, C)
local shown = 0
if visible then shown = 1 end
return {'deleted', shown, owner, v[3] or ''}
""",
    writes=True,
)

REGISTER: Final = script(
    "register",
    r"""
-- KEYS: the tenant's index of sessions, the owner's index, the tenant's set of owners.
-- ARGV: session id, order, owner ('' for none).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[3])
end
return 1
""",
    writes=True,
)

UNINDEX: Final = script(
    "unindex",
    r"""
-- KEYS: index keys. ARGV: session id, order. Removes the entry from each index where it
-- still has this order (a session created again since has another, and stays listed).
local n = 0
for _, k in ipairs(KEYS) do
  local s = redis.call('ZSCORE', k, ARGV[1])
  if s and (ARGV[2] == '' or tonumber(s) == tonumber(ARGV[2])) then
    n = n + redis.call('ZREM', k, ARGV[1])
  end
end
return n
""",
    writes=True,
)

LAYOUT: Final = script(
    "layout",
    r"""
-- KEYS: <prefix>:layout. ARGV: this version's layout. Records it on a new prefix;
-- replies the layout the prefix was written with.
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return tonumber(redis.call('GET', KEYS[1]))
""",
    writes=True,
)
