"""Each adapter, imported without its framework, names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [
    ("langgraph", "langgraph", "langgraph"),
    ("langchain", "langchain_core", "langchain"),
    ("llamaindex", "llama_index", "llamaindex"),
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
]


@pytest.mark.parametrize(("module", "blocked", "extra"), CASES)
def test_an_adapter_without_its_framework_names_the_extra(
    module: str, blocked: str, extra: str
) -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {blocked!r} or name.startswith({blocked!r} + '.'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from convomem.errors import MissingDependency\n"
        "try:\n"
        f"    import convomem.integrations.{module}\n"
        "except MissingDependency as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'convomem[{extra}]'" in done.stdout
