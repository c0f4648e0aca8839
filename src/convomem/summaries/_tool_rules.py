"""The offline extractor's rules for tool results: the fields a tool returned.

``tool_facts(text)`` reads JSON leaves (nested keys joined), ``key=value`` pairs and
``Label: value`` phrases, at most ``MAX_TOOL_FIELDS``; texts are cut to ``MAX_TEXT``
characters and every pattern is bounded, so a hostile result costs linear time.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from .keyed import norm_attribute

MAX_TEXT: Final = 8_192
MAX_VALUE: Final = 80

_KV = re.compile(r"(?<![\w.])(?P<k>[A-Za-z][\w.-]{1,40})=(?P<v>\"[^\"\n]{0,80}\"|[^,;\s&]{1,80})")
_LABEL = re.compile(
    r"(?:^|(?<=[.;,\n]\s)|(?<=\n))(?P<k>[A-Z][\w -]{1,30}?):[ \t]*(?P<v>[^\n;,]{1,80}?)"
    r"(?=\.\s|\.$|[\n;,]|$)"
)
MAX_TOOL_FIELDS: Final = 40


def tool_facts(text: str) -> list[tuple[str, str]]:
    """The fields a tool result states: JSON leaves (nested keys joined), ``key=value``
    pairs, ``Label: value`` phrases; at most ``MAX_TOOL_FIELDS``."""
    text = text[:MAX_TEXT]
    out: list[tuple[str, str]] = []
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if data is not None:
            _leaves(data, (), out)
            return out[:MAX_TOOL_FIELDS]
    for m in _KV.finditer(text):
        out.append((m.group("k").replace("_", " "), m.group("v").strip('"')))
    for m in _LABEL.finditer(text):
        out.append((m.group("k"), m.group("v").strip()))
    return [(norm_attribute(k), v) for k, v in out if v][:MAX_TOOL_FIELDS]


def _leaves(data: Any, path: tuple[str, ...], out: list[tuple[str, str]]) -> None:
    if len(out) >= MAX_TOOL_FIELDS or len(path) > 6:
        return
    if isinstance(data, dict):
        for k, v in data.items():
            _leaves(v, (*path, str(k)), out)
    elif isinstance(data, list):
        for v in data[:20]:
            _leaves(v, path, out)
    elif data is not None and path:
        value = str(data)
        if 0 < len(value) <= MAX_VALUE:
            out.append((norm_attribute(" ".join(path)), value))
