"""Adapters that plug convomem into other frameworks.

- ``convomem.integrations.langgraph``: ``ConvomemContext`` (the model's context as a
  ``pre_model_hook`` / node) and ``ConvomemStore`` (LangGraph's ``BaseStore``); extra
  ``langgraph``.
- ``convomem.integrations.langchain.ConvomemChatMessageHistory``: LangChain's
  ``BaseChatMessageHistory``; extra ``langchain``.
- ``convomem.integrations.llamaindex``: ``ConvomemMemory`` (a ``BaseMemory`` for agents)
  and ``ConvomemChatStore``; extra ``llamaindex``.
- ``convomem.integrations.pydantic_ai.convomem_history``: the view as what a pydantic-ai
  agent's model reads; extra ``pydantic-ai``.
- ``convomem.integrations.openai_agents.ConvomemSession``: the OpenAI Agents SDK's
  ``Session`` over any convomem store (extra ``agents`` for the SDK itself).

They share one conversion layer (``convomem.formats``) and one session layer
(``_session``: what is new in a framework's history, the view, sync and async twins).
Each adapter is its own module, imported only when named, so this package costs nothing;
a missing framework raises ``MissingDependency`` naming the extra.
"""
