"""Every ```python block of the README runs, in order, in one namespace."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 10


def test_readme_examples_run() -> None:
    namespace: dict[str, object] = {"__name__": "readme"}
    for i, block in enumerate(BLOCKS):
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                exec(compile(block, f"README.md[python block {i}]", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"README python block {i} failed:\n{block}") from exc
