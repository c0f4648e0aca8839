"""Conversions between convomem messages and provider or framework formats.

The framework formats live in their own modules, imported only when named:
``convomem.formats.langchain`` (extra ``langchain``), ``convomem.formats.pydantic_ai``
(extra ``pydantic-ai``) and ``convomem.formats.llamaindex`` (extra ``llamaindex``).
"""

from .anthropic import from_anthropic, to_anthropic
from .openai import from_openai, order_tool_results, to_openai
from .openai_responses import from_responses, to_responses

__all__ = [
    "from_anthropic",
    "from_openai",
    "from_responses",
    "order_tool_results",
    "to_anthropic",
    "to_openai",
    "to_responses",
]
