"""Every ```python block of the integration pages runs on its own, in a fresh namespace
(a reader copies one block, not the whole page), as the README's do."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[2] / "docs" / "integrations").glob("*.md"))
BLOCKS = [
    (page.name, i, code)
    for page in PAGES
    for i, code in enumerate(
        re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    )
]


def test_every_integration_has_a_page_with_examples() -> None:
    assert {p.stem for p in PAGES} >= {"langchain", "langgraph", "llamaindex", "pydantic_ai"}
    assert {name for name, _, _ in BLOCKS} == {p.name for p in PAGES}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("page", "i", "code"), BLOCKS, ids=[f"{n}[{i}]" for n, i, _ in BLOCKS])
def test_example_runs_alone(page: str, i: int, code: str) -> None:
    namespace: dict[str, object] = {"__name__": "docs"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, f"docs/integrations/{page}[python block {i}]", "exec"), namespace)
