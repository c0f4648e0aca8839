"""Inline SVG charts for the inspector: per-turn series and the budget's bar.

Pure functions from numbers to markup (no FastAPI, no JavaScript): the page is readable
without scripts, and the live update only swaps the markup the server rendered. Every
drawn value is also in a ``data-`` attribute, so a test reads the numbers the page shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

__all__ = ["Series", "bar", "chart"]

WIDTH: Final = 560
HEIGHT: Final = 180
PAD_LEFT: Final = 56
PAD_RIGHT: Final = 28
PAD_TOP: Final = 14
PAD_BOTTOM: Final = 28


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a chart: a name, its values per turn (None: not recorded), a colour."""

    name: str
    values: Sequence[float | None]
    color: str
    dashed: bool = False


def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e12:
        return str(int(v))
    if abs(v) >= 0.01:
        return f"{v:.2f}"
    return f"{v:.2g}"


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(v))
    for step in (1, 2, 2.5, 5, 10):
        if step * exp >= v:
            return step * exp
    return v


def chart(
    ident: str,
    title: str,
    turns: Sequence[int],
    series: Sequence[Series],
    *,
    unit: str = "",
    limit: float | None = None,
) -> str:
    """A line chart of ``series`` over ``turns``; ``limit`` draws a horizontal line (the
    budget). With no recorded turn it says so instead of drawing an empty frame."""
    head = f'<figure class="chart" id="{escape(ident)}" data-turns="{len(turns)}">'
    cap = f"<figcaption>{escape(title)}</figcaption>"
    if not turns:
        return f'{head}{cap}<p class="empty">No turn recorded yet.</p></figure>'
    values = [v for s in series for v in s.values if v is not None]
    top = _nice_max(max([*values, limit or 0.0, 0.0]))
    inner_w = WIDTH - PAD_LEFT - PAD_RIGHT
    inner_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    n = len(turns)

    def x(i: int) -> float:
        return PAD_LEFT + (inner_w * i / (n - 1) if n > 1 else inner_w / 2)

    def y(v: float) -> float:
        return PAD_TOP + inner_h * (1 - v / top)

    out = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP + inner_h}" '
        f'x2="{WIDTH - PAD_RIGHT}" y2="{PAD_TOP + inner_h}"/>',
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{PAD_LEFT}" '
        f'y2="{PAD_TOP + inner_h}"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        v = top * frac
        out.append(
            f'<text class="tick" x="{PAD_LEFT - 6}" y="{y(v) + 4:.1f}" '
            f'text-anchor="end">{escape(_fmt(v))}{escape(unit)}</text>'
        )
    for i in sorted({0, n - 1, (n - 1) // 2}):
        out.append(
            f'<text class="tick" x="{x(i):.1f}" y="{HEIGHT - 8}" '
            f'text-anchor="middle">turn {turns[i]}</text>'
        )
    if limit is not None:
        out.append(
            f'<line class="limit" x1="{PAD_LEFT}" y1="{y(limit):.1f}" x2="{WIDTH - PAD_RIGHT}" '
            f'y2="{y(limit):.1f}"><title>budget {_fmt(limit)}</title></line>'
        )
    for s in series:
        pts = [(x(i), y(v), turns[i], v) for i, v in enumerate(s.values) if v is not None]
        data = ",".join("" if v is None else _fmt(v) for v in s.values)
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        out.append(f'<g class="series" data-name="{escape(s.name)}" data-values="{data}">')
        if len(pts) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
            )
        for px, py, turn, v in pts:
            out.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{s.color}">'
                f"<title>turn {turn}: {escape(s.name)} {escape(_fmt(v))}{escape(unit)}</title>"
                "</circle>"
            )
        out.append("</g>")
    out.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{s.color}"></i>{escape(s.name)}</span>'
        for s in series
    )
    return f'{head}{cap}{"".join(out)}<div class="legend">{legend}</div></figure>'


def bar(parts: Sequence[tuple[str, str, int, str]], total: int) -> str:
    """A stacked bar of ``(key, label, tokens, colour)`` parts out of ``total`` tokens.

    A negative part (the budget overrun when pins alone exceed it) is drawn as zero and
    named in the legend; widths are shares of ``max(total, sum of parts)``."""
    scale = max(total, sum(max(0, p[2]) for p in parts), 1)
    cells = []
    legend = []
    for key, label, tokens, color in parts:
        width = 100 * max(0, tokens) / scale
        cells.append(
            f'<div class="part part-{escape(key)}" data-part="{escape(key)}" '
            f'data-tokens="{tokens}" style="width:{width:.3f}%;background:{color}" '
            f'title="{escape(label)}: {tokens} tokens"></div>'
        )
        legend.append(
            f'<span class="key"><i style="background:{color}"></i>{escape(label)} '
            f'<b data-legend="{escape(key)}">{tokens}</b></span>'
        )
    return (
        f'<div class="bar" data-total="{total}">{"".join(cells)}</div>'
        f'<div class="legend">{"".join(legend)}</div>'
    )
