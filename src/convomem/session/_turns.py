"""How a view's messages are ordered and begun: the rules every request of a session
keeps (a result right after its call; a first turn that can lead, or a stand-in)."""

from __future__ import annotations

from typing import Final

from ..errors import TokenizerError
from ..model import Message, starts_turn
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer

STAND_IN: Final = Message(
    "convomem_continued",
    "user",
    content="[The earlier turns of this conversation are summarized above.]",
)
"""The user turn a context starts with when its first turn cannot lead (a provider such
as Anthropic needs a user turn first)."""


def stand_in_tokens(tokenizer: Tokenizer) -> int:
    """What ``STAND_IN`` costs. A tokenizer that only trusts given counts (``given``)
    cannot count it: text convomem wrote, so its text is counted plus the overhead."""
    try:
        return tokenizer.count_message(STAND_IN)
    except TokenizerError:
        return tokenizer.count(STAND_IN.text()) + PER_MESSAGE_TOKENS


def opens_turn(m: Message) -> bool:
    """A message a request may start with: a turn start with content."""
    return starts_turn(m) and bool(m.content)


def skippable(m: Message) -> bool:
    """Whether a request may leave ``m`` out when it comes before the first turn: plain
    (no tool blocks, which would orphan their partners) and not pinned by priority."""
    return m.priority < 2 and (
        type(m.content) is str or not (m.has_tool_use() or m.has_tool_result())
    )


def needs_stand_in(messages: list[Message]) -> bool:
    """Whether ``messages`` (system messages aside) do not start with a turn and cannot
    simply leave out what comes before the first one."""
    lead = [m for m in messages if m.role != "system"]
    first = next((i for i, m in enumerate(lead) if opens_turn(m)), None)
    if first == 0 or not lead:
        return False
    return first is None or not all(skippable(m) for m in lead[:first])


def joined(messages: list[Message], stand_in: bool = False) -> int:
    """How many of ``messages`` an Anthropic request joins to the user message before it
    (a message carrying tool results after a user turn, or after other results, as
    ``to_anthropic`` does; ``stand_in``: ``STAND_IN`` comes first). Joined texts are
    separated by a newline, so each may cost one token more than counted apart."""
    n = 0
    user = stand_in
    for m in messages:
        if m.role == "system":
            continue
        now = m.role != "assistant"
        if now and user and m.has_tool_result():
            n += 1
        user = now
    return n


def answers_first(messages: list[Message]) -> list[Message]:
    """``messages`` with every tool result right after the call it answers.

    A message that arrived while calls were open (the user typing while a tool ran, a
    second call) waits until they are answered: providers reject anything between a
    call and its results. Order is kept otherwise; the log keeps the real order.

    A message answering a call made by a waiting message waits too (after it), so a
    result never comes before its call, even when one message answers calls of two
    exchanges (an Anthropic-style user turn): such a request has no order without a
    message between a call and a result, and keeping every call before its results is
    what matters.
    """
    out: list[Message] = []
    waiting: list[Message] = []
    open_: set[str] = set()
    held: set[str] = set()  # calls made by waiting messages

    def place(m: Message) -> None:
        results = m.tool_result_ids()
        answers = open_.intersection(results)
        if (open_ and not answers) or (held and not held.isdisjoint(results)):
            waiting.append(m)
            held.update(m.tool_use_ids())
            return
        out.append(m)
        open_.difference_update(answers)
        open_.update(m.tool_use_ids())

    for m in messages:
        place(m)
        while not open_ and waiting:
            again, waiting[:] = list(waiting), []
            held.clear()
            for w in again:
                place(w)
    out.extend(waiting)
    return out
