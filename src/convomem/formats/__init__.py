"""Conversions between convomem messages and provider or framework formats.

LangChain lives in ``convomem.formats.langchain`` (extra ``langchain``).
"""

from .anthropic import from_anthropic, to_anthropic
from .openai import from_openai, to_openai
from .openai_responses import from_responses, to_responses

__all__ = [
    "from_anthropic",
    "from_openai",
    "from_responses",
    "to_anthropic",
    "to_openai",
    "to_responses",
]
