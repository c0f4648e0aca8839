"""What both clients share besides the operations: configuration, headers, the lazy
import of httpx and the mapping of its transport failures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _check
from .._version import __version__
from ..errors import ConfigError, MissingDependency, TransientError
from ._wire import Request

if TYPE_CHECKING:
    import httpx


def import_httpx() -> Any:
    """httpx, or ``MissingDependency`` naming the ``client`` extra."""
    try:
        import httpx
    except ImportError:
        raise MissingDependency("convomem.client", "client", "httpx") from None
    return httpx


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """A client's checked options."""

    base_url: str
    api_key: str | None
    retries: int

    @classmethod
    def make(cls, base_url: str, api_key: str | None, timeout: float, retries: int) -> ClientConfig:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url={base_url!r}: must be an http:// or https:// URL")
        if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
            raise ConfigError(f"api_key={api_key!r}: must be a non-empty string or None")
        _check.number("timeout", timeout, minimum=0.0, low_open=True)
        return cls(base_url.rstrip("/"), api_key, cls.count("retries", retries))

    @staticmethod
    def count(name: str, value: int) -> int:
        """A non-negative int option (``retries``, ``retry_conflicts``)."""
        return _check.non_negative_int(name, value)

    def headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The request's headers: the key, the user agent, then the request's own."""
        out = {"User-Agent": f"convomem-client/{__version__}"}
        if self.api_key is not None:
            out["Authorization"] = f"Bearer {self.api_key}"
        out.update(extra)
        return out


def transport_error(e: httpx.TransportError, step: Request) -> TransientError:
    """A connection refused, reset or timed out, as the retryable error it is."""
    return TransientError(f"{step.method} {step.path}: {type(e).__name__}: {e}")
