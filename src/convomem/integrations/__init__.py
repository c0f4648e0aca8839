"""Adapters that plug convomem into other frameworks.

- ``convomem.integrations.openai_agents.ConvomemSession``: the OpenAI Agents SDK's
  ``Session`` over any convomem store (extra ``agents`` for the SDK itself).

Each adapter is its own module, imported only when named, so this package costs nothing.
"""
