"""The convomem command line (``convomem`` or ``python -m convomem``)."""

from .main import build_parser, main
from .readers import read_conversation

__all__ = ["build_parser", "main", "read_conversation"]
