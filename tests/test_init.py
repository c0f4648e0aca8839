import re
from pathlib import Path

import convomem


def test_every_public_name_is_importable() -> None:
    for name in convomem.__all__:
        assert getattr(convomem, name) is not None, name
    assert sorted(convomem.__all__) == sorted(set(convomem.__all__))


def test_version_is_the_changelogs_latest() -> None:
    changelog = (Path(__file__).resolve().parent.parent / "CHANGELOG.md").read_text()
    latest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, flags=re.M)
    assert latest is not None and latest.group(1) == convomem.__version__


def test_errors_form_one_hierarchy() -> None:
    for name in convomem.__all__:
        obj = getattr(convomem, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, convomem.ConvomemError), name
    assert issubclass(convomem.InvalidMessage, ValueError)
    assert issubclass(convomem.ConfigError, ValueError)
    assert issubclass(convomem.MissingDependency, ImportError)


def test_core_import_pulls_no_optional_dependency() -> None:
    import subprocess
    import sys

    code = (
        "import sys, convomem; "
        "bad = [m for m in ('tiktoken', 'tokenizers', 'numpy', 'openai', 'langchain_core',"
        " 'matplotlib') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
