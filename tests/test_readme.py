"""Every ```python block of the README runs on its own, in a fresh namespace (a reader
copies one block, not the whole page)."""

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_example_runs_alone(i: int) -> None:
    namespace: dict[str, object] = {"__name__": "readme"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(BLOCKS[i], f"README.md[python block {i}]", "exec"), namespace)
