"""tiktoken's encodings as tiktoken defines them, less the merge ranks.

A ``.tiktoken`` file holds only the merge ranks; the split pattern, the special tokens
and the published SHA-256 of each file are here, copied from
``tiktoken_ext.openai_public`` (a test checks them against it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

_BLOB: Final = "https://openaipublic.blob.core.windows.net/encodings/"
_ENDOFTEXT: Final = "<|endoftext|>"
_ENDOFPROMPT: Final = "<|endofprompt|>"
_FIM: Final = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")

_R50K_PAT: Final = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
_CL100K_PAT: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT: Final = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_HARMONY_SPECIAL: Final = {
    _ENDOFPROMPT: 200018,
    "<|startoftext|>": 199998,
    _ENDOFTEXT: 199999,
    "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011,
    "<|call|>": 200012,
} | {f"<|reserved_{i}|>": i for i in range(200013, 201088)}


@dataclass(frozen=True)
class KnownEncoding:
    """An encoding as tiktoken defines it, less the merge ranks (they live in ``file``)."""

    name: str
    file: str | None  # the BPE file's stem; None when it is not a single .tiktoken file
    sha256: str
    pat_str: str
    special_tokens: dict[str, int] = field(hash=False)
    explicit_n_vocab: int | None = None

    @property
    def url(self) -> str:
        return f"{_BLOB}{self.file}.tiktoken"


_CL100K_HASH: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_O200K_HASH: Final = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_P50K_HASH: Final = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_R50K_HASH: Final = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"

KNOWN: Final[dict[str, KnownEncoding]] = {
    k.name: k
    for k in (
        KnownEncoding("gpt2", None, "", _R50K_PAT, {_ENDOFTEXT: 50256}, 50257),
        KnownEncoding("r50k_base", "r50k_base", _R50K_HASH, _R50K_PAT, {_ENDOFTEXT: 50256}, 50257),
        KnownEncoding("p50k_base", "p50k_base", _P50K_HASH, _R50K_PAT, {_ENDOFTEXT: 50256}, 50281),
        KnownEncoding(
            "p50k_edit",
            "p50k_base",
            _P50K_HASH,
            _R50K_PAT,
            {_ENDOFTEXT: 50256, _FIM[0]: 50281, _FIM[1]: 50282, _FIM[2]: 50283},
        ),
        KnownEncoding(
            "cl100k_base",
            "cl100k_base",
            _CL100K_HASH,
            _CL100K_PAT,
            {_ENDOFTEXT: 100257, _FIM[0]: 100258, _FIM[1]: 100259, _FIM[2]: 100260}
            | {_ENDOFPROMPT: 100276},
        ),
        KnownEncoding(
            "o200k_base",
            "o200k_base",
            _O200K_HASH,
            _O200K_PAT,
            {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
        ),
        KnownEncoding("o200k_harmony", "o200k_base", _O200K_HASH, _O200K_PAT, _HARMONY_SPECIAL),
    )
}
"""tiktoken's own definitions (``tiktoken_ext.openai_public``), by encoding name."""
