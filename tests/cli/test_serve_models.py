"""``convomem serve`` with its models on OpenAI-compatible endpoints: the options reach
the settings, a bad spec is one line naming it, and real ``convomem serve`` processes
against a local fake server (``_fake_openai``): the models' answers used, then every
model timing out while appends keep succeeding and the fallbacks are recorded; and a
service whose models are unreachable from the start, which starts and degrades."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _cli_support import one_line_failure, run
from _fake_openai import FakeOpenAI, start
from _servers_app import Launcher, create_key, serve_app  # noqa: F401
from _servers_redis import free_port

TURNS = [
    "Hi, I'm Ana. My name is Ana. codeword: falcon",
    "The parcel 4471 went to Lisbon instead of Porto, can you check the courier?",
    "Please send it on to Porto then, the street is Rua das Flores 12.",
    "Also my dentist appointment moved to Friday, remind me about it later.",
    "And my locker code at the gym is 5512, keep it for me please.",
    "One more thing: the invoice 88-301 was charged twice this month.",
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    for name in ("OPENAI_API_KEY", "CONVOMEM_LLM_API_KEY", "CONVOMEM_EMBEDDING_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # the processes inherit the environment
    yield from start(FakeOpenAI(delay=3.0))


def models(llm: str, embeddings: str, timeout: str) -> list[str]:
    return [
        "--summarizer", "openai:chat", "--extractor", "openai:chat", "--embedder", "openai:emb",
        "--llm-base-url", llm, "--embedding-base-url", embeddings,
        "--llm-timeout", timeout, "--embedding-timeout", timeout, "--budget", "400",
    ]  # fmt: skip


def test_the_model_options_reach_the_settings(tmp_path: Path) -> None:
    from convomem.cli.main import build_parser
    from convomem.cli.serve import settings_of

    store = f"sqlite:///{tmp_path / 'e.db'}"
    argv = ["serve", "--store", store, *models("http://h:1/v1", "http://e:2/v1", "2.5")]
    s = settings_of(build_parser().parse_args(argv))
    assert (s.summarizer, s.extractor, s.embedder) == ("openai:chat", "openai:chat", "openai:emb")
    assert (s.llm_base_url, s.embedding_base_url) == ("http://h:1/v1", "http://e:2/v1")
    assert s.llm_timeout == 2.5 and s.embedding_timeout == 2.5
    assert s.llm_api_key is None and s.embedding_api_key is None  # keys: the environment only
    s = settings_of(build_parser().parse_args(["serve", "--store", store]))
    assert (s.summarizer, s.extractor, s.embedder) == ("extractive", "offline", "static")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--summarizer", "gpt-4o"), ("--extractor", "openai:"), ("--embedder", "bert")],
)
def test_a_bad_model_spec_is_one_line_naming_it(option: str, value: str) -> None:
    code, out, err = run("serve", option, value)
    one_line_failure(code, out, err)
    assert f"{option.lstrip('-')}='{value}'" in err


def test_a_model_without_a_key_stops_the_start_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "CONVOMEM_LLM_API_KEY", "CONVOMEM_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    store = f"sqlite:///{tmp_path / 'k.db'}"
    code, out, err = run("serve", "--store", store, "--summarizer", "openai:gpt-4o-mini")
    one_line_failure(code, out, err)
    assert "needs an API key" in err


def converse(base: str, h: dict[str, str], sid: str) -> None:
    with httpx.Client(base_url=base, headers=h, timeout=60.0) as c:
        assert c.post("/v1/sessions", json={"id": sid, "user_id": "ana"}).status_code == 201
        for said in TURNS:
            text = f"({sid}) {said}"  # other words each session: the user's facts read them
            turn = [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "Noted: " + text},
            ]
            r = c.post(f"/v1/sessions/{sid}/messages", json={"messages": turn})
            assert r.status_code == 201, r.text
        log = c.get(f"/v1/sessions/{sid}/messages", params={"limit": 100}).json()
        assert len(log["messages"]) == 2 * len(TURNS)  # every message stored


def accounting(base: str, h: dict[str, str], sid: str) -> dict[str, Any]:
    query = f"in {sid}, which locker code?"  # a new query: no cached embedding answers it
    r = httpx.get(
        f"{base}/v1/sessions/{sid}/context", params={"query": query}, headers=h, timeout=60
    )
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["accounting"]
    return out


def test_real_services_use_the_models_and_degrade_when_they_fail(
    fake: FakeOpenAI,
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
) -> None:
    up_store, down_store = (f"sqlite:///{tmp_path / n}" for n in ("up.db", "down.db"))
    up_key, down_key = create_key(up_store, "acme"), create_key(down_store, "acme")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    up = serve_app.spawn(up_store, 1, *models(fake.url, fake.url, "0.3"))
    down = serve_app.spawn(down_store, 1, *models(dead, dead, "0.3"))
    serve_app.ready(up, down)  # a model unreachable at start does not keep it from starting

    base, h = up[0].url, {"Authorization": f"Bearer {up_key}"}
    converse(base, h, "s1")
    acc = accounting(base, h, "s1")
    assert not acc["summary"]["degraded"] and acc["summary"]["text"].count("MODEL SUMMARY")
    assert not acc["facts"]["degraded"] and acc["recall_status"] == "ok"
    facts = httpx.get(f"{base}/v1/users/ana/facts", headers=h).json()["current"]
    assert {"codeword": "falcon"}.items() <= {f["attribute"]: f["value"] for f in facts}.items()

    fake.fail("all", "timeout")  # every model now answers after the client gave up
    converse(base, h, "s2")
    acc = accounting(base, h, "s2")
    assert acc["summary"]["degraded"] and "MODEL SUMMARY" not in acc["summary"]["text"]
    assert acc["facts"]["degraded"] and acc["recall_status"] in ("failed", "timeout")

    base, h = down[0].url, {"Authorization": f"Bearer {down_key}"}
    converse(base, h, "s1")
    acc = accounting(base, h, "s1")
    assert acc["summary"]["degraded"] and acc["facts"]["degraded"]
    assert acc["recall_status"] == "failed"
