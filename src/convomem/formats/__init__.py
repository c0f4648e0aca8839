"""Conversions between convomem messages and provider or framework formats.

LangChain lives in ``convomem.formats.langchain`` (extra ``langchain``).
"""

from .anthropic import from_anthropic, to_anthropic
from .openai import from_openai, to_openai

__all__ = ["from_anthropic", "from_openai", "to_anthropic", "to_openai"]
