"""The streaming OpenAI-compatible client against the local fake upstream: deltas in
order, usage at the end, and every kind of failure a TransientError."""

from collections.abc import Iterator

import pytest

from _fake_upstream import FakeUpstream, start
from convomem.errors import ConfigError, TransientError
from convomem.server.upstream import Finished, Upstream


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    yield from start(FakeUpstream(reply="The parcel left Lyon on Monday.", pieces=5))


async def collect(up: Upstream) -> list[str | Finished]:
    try:
        return [item async for item in up.stream([{"role": "user", "content": "where?"}])]
    finally:
        await up.aclose()


async def test_deltas_then_finished_with_usage(fake: FakeUpstream) -> None:
    items = await collect(Upstream(fake.url, "fake-model", "sk-test"))
    *deltas, end = items
    assert "".join(deltas) == fake.reply and deltas == fake.deltas()  # type: ignore[arg-type]
    assert end == Finished(
        "stop", {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    )
    (body,) = fake.requests
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "where?"}]
    assert fake.headers[0]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("mode", "match"), [("status", "HTTP 500"), ("cut", "ended before"), ("error", "mid-stream")]
)
async def test_each_failure_is_transient(fake: FakeUpstream, mode: str, match: str) -> None:
    fake.mode = mode
    with pytest.raises(TransientError, match=match):
        await collect(Upstream(fake.url, "m"))


async def test_a_refused_connection_is_transient(fake: FakeUpstream) -> None:
    with pytest.raises(TransientError, match="ConnectError"):
        await collect(Upstream("http://127.0.0.1:9/v1", "m"))


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="upstream_url"):
        Upstream("ftp://x", "m")
    with pytest.raises(ConfigError, match="upstream_model"):
        Upstream("http://x", "")
