"""The client's options are checked before any request, and a missing httpx names the
extra to install."""

import sys

import pytest

from convomem.client import Client
from convomem.client._common import ClientConfig, import_httpx
from convomem.errors import ConfigError, MissingDependency


def test_missing_httpx_names_the_client_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingDependency, match=r"convomem\[client\]"):
        import_httpx()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("ftp://x", None, 1.0, 0), "base_url"),
        (("http://x", "  ", 1.0, 0), "api_key"),
        (("http://x", None, 0.0, 0), "timeout"),
        (("http://x", None, 1.0, -1), "retries"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(args: tuple, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        ClientConfig.make(*args)


def test_headers_carry_the_key_and_the_request_s_own() -> None:
    config = ClientConfig.make("http://x/", "k1", 1.0, 0)
    assert config.base_url == "http://x"
    headers = config.headers({"If-Match": "3"})
    assert headers["Authorization"] == "Bearer k1" and headers["If-Match"] == "3"
    assert headers["User-Agent"].startswith("convomem-client/")


def test_a_refused_connection_is_a_transient_error_after_the_retries() -> None:
    from convomem.errors import TransientError

    with (
        Client("http://127.0.0.1:9", "k", retries=1, timeout=2) as c,
        pytest.raises(TransientError, match="GET /healthz"),
    ):
        c.health()
