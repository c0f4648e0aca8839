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
    """Every exception class convomem defines lives in convomem.errors, under ConvomemError."""
    import inspect
    import pkgutil

    from convomem import errors

    defined = [
        obj
        for name, obj in vars(errors).items()
        if isinstance(obj, type)
        and issubclass(obj, Exception)
        and obj.__module__ == errors.__name__
    ]
    assert len(defined) >= 10
    for cls in defined:
        assert issubclass(cls, convomem.ConvomemError), cls
    assert issubclass(errors.InvalidMessage, ValueError)
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.MissingDependency, ImportError)
    # No other module defines a public exception class of its own (a private one used
    # for control flow inside a module never escapes it).
    for info in pkgutil.walk_packages(convomem.__path__, "convomem."):
        if info.name == "convomem.__main__":
            continue
        module = __import__(info.name, fromlist=["_"])
        for _, obj in inspect.getmembers(module, inspect.isclass):
            public = not obj.__name__.startswith("_")
            if issubclass(obj, BaseException) and obj.__module__ == info.name and public:
                assert info.name == "convomem.errors", f"{obj} is defined in {info.name}"


def test_the_root_is_small() -> None:
    assert 25 <= len(convomem.__all__) <= 32


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
