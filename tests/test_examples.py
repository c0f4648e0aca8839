"""The bundled example data and the demo cannot rot."""

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_conversation_is_what_the_generator_makes() -> None:
    committed = json.loads((EXAMPLES / "support_conversation.json").read_text())
    assert load("make_conversation").build() == committed
    assert 300 <= len(committed) <= 600
    roles = {m["role"] for m in committed}
    assert roles == {"system", "user", "assistant", "tool"}


def test_demo_runs_and_shows_each_job() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        load("demo").main()
    text = out.getvalue()
    for heading in ("paginated loading", "incremental window", "pack to", "ConversationMemory"):
        assert heading in text
    assert "loaded 417 messages" in text
    assert "Summary of the earlier conversation" in text
