"""``lazy(name)``: a module imported at its first attribute access.

A test module that names a framework (LlamaIndex, pydantic-ai, the Agents SDK) only in
its tests' bodies and strategies imports it through ``lazy``: collecting it imports
nothing, so a run that deselects those tests (``make check``) or a worker that runs none
of them does not pay the framework's import (a second or more each)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Lazy(ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's and hypothesis's probes at collection
            raise AttributeError(attr)
        return getattr(importlib.import_module(self.__name__), attr)


def lazy(name: str) -> Any:
    """The module ``name``, imported when an attribute of it is first read."""
    return _Lazy(name)
