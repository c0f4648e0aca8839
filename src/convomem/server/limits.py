"""Per-key rate limits: a token bucket per API key, in-process or shared through Redis.

Each key may make ``burst`` requests at once and ``rate`` per second on average. The
in-process ``LocalBuckets`` hold per replica; ``RedisBuckets`` keep every bucket in Redis
(one hash per key, updated by one Lua script with the server's clock), so the limit
holds across replicas. ``take`` answers ``(allowed, retry_after_seconds)``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, Protocol

from ..errors import MissingDependency, TransientError

__all__ = ["Buckets", "LocalBuckets", "RedisBuckets"]


class Buckets(Protocol):
    async def take(self, key_id: str) -> tuple[bool, float]: ...
    async def aclose(self) -> None: ...


class LocalBuckets:
    """Token buckets in this process (at most ``size`` keys; the idlest are forgotten,
    which only ever refills them)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        size: int = 100_000,
    ) -> None:
        self.rate, self.burst, self._clock, self._size = rate, burst, clock, size
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    async def take(self, key_id: str) -> tuple[bool, float]:
        now = self._clock()
        with self._lock:
            tokens, ts = self._buckets.pop(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - ts) * self.rate)
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            self._buckets[key_id] = (tokens, now)
            if len(self._buckets) > self._size:
                self._buckets.popitem(last=False)
        return allowed, 0.0 if allowed else (1.0 - tokens) / self.rate

    async def aclose(self) -> None:
        return None


_SCRIPT: Final = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1]) or burst
local ts = tonumber(s[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""


class RedisBuckets:
    """Token buckets in Redis (``<prefix>:ratelimit:<key_id>``), shared by replicas."""

    def __init__(self, url: str, rate: float, burst: int, *, prefix: str = "convomem") -> None:
        try:
            import redis.asyncio as aredis
        except ImportError:
            raise MissingDependency("a Redis-backed rate limit", "redis", "redis") from None
        self.rate, self.burst, self.prefix = rate, burst, prefix
        self._client: Any = aredis.Redis.from_url(url, socket_timeout=5)
        self._script: Any = self._client.register_script(_SCRIPT)

    async def take(self, key_id: str) -> tuple[bool, float]:
        try:
            allowed, wait = await self._script(
                keys=[f"{self.prefix}:ratelimit:{key_id}"], args=[self.rate, self.burst]
            )
        except Exception as exc:  # redis-py's errors: the limit cannot be checked
            raise TransientError(f"rate limit (redis): {type(exc).__name__}: {exc}") from exc
        return bool(int(allowed)), float(wait)

    async def ping(self) -> None:
        """Whether Redis answers (``/readyz``); ``TransientError`` when it does not."""
        try:
            await self._client.ping()
        except Exception as exc:
            raise TransientError(f"rate limit (redis): {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        await self._client.aclose()


def retry_after(seconds: float) -> str:
    """The ``Retry-After`` header: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
