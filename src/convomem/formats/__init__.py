"""Conversions between convomem messages and provider or framework formats."""

from .openai import from_openai, to_openai

__all__ = ["from_openai", "to_openai"]
