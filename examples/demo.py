"""`make demo`: convomem's main jobs on the bundled support conversation.

1. load the history page by page from a (flaky) store,
2. replay it through the incremental window with hysteresis,
3. pack it to a budget and explain every decision,
4. run it through ConversationMemory, which compacts old turns into a summary.
"""

from __future__ import annotations

import json
from pathlib import Path

from convomem import (
    ConversationMemory,
    History,
    Message,
    Packer,
    TransientError,
    from_openai,
    load_history,
    validate_pairs,
)
from convomem.strategies import Recency

EXAMPLE = Path(__file__).with_name("support_conversation.json")


def banner(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def main() -> None:
    conversation = from_openai(json.loads(EXAMPLE.read_text()))

    banner("1. paginated loading (pages of 50, every third call fails once)")
    calls = {"n": 0}

    def fetch_page(cursor: str | None) -> tuple[list[Message], str | None]:
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise TransientError("store timed out")
        start = int(cursor or 0)
        stop = start + 50
        return conversation[start:stop], (str(stop) if stop < len(conversation) else None)

    loaded = load_history(fetch_page, sleep=lambda _s: None)
    print(f"loaded {len(loaded)} messages in {calls['n']} calls (retries included)")
    assert loaded == conversation

    banner("2. incremental window: limit 1,500 tokens, cut to 900, system prompt pinned")
    history = History(1500, tokenizer="tiktoken:cl100k_base", pin=("system",), target=900)
    compactions = 0
    for m in loaded:
        if history.add(m):
            compactions += 1
    print(
        f"{compactions} compactions over {len(loaded)} messages; now "
        f"{len(history)} messages, {history.total()} tokens"
    )
    print(f"first kept: {history.kept()[0].text()[:60]}...")

    banner("3. pack to 1,200 tokens with Recency, decisions explained (last rows)")
    print(
        "(the same as: convomem pack examples/support_conversation.json --budget 1200 "
        "--tokenizer tiktoken:cl100k_base --explain)"
    )
    packer = Packer(budget=1200, tokenizer="tiktoken:cl100k_base", strategy=Recency())
    result = packer.pack(loaded)
    table = result.explain().splitlines()
    print("\n".join([*table[:3], "   ...", *table[-8:]]))
    assert validate_pairs(result.kept) == []

    banner("4. ConversationMemory: 1,500-token context, old turns summarized once")
    memory = ConversationMemory(max_tokens=1500, tokenizer="tiktoken:cl100k_base")
    for m in loaded:
        memory.add_message(m)
    context = memory.context()
    stats = memory.stats()
    print(
        f"log {stats.log_messages} messages; context {stats.context_messages} messages, "
        f"{stats.context_tokens} tokens; {stats.compactions} compactions, "
        f"{stats.summarizer_calls} summarizer calls"
    )
    print(f"context[0] (system prompt): {context[0]['content'][:60]}...")
    print("context[1] (the running summary):")
    for line in str(context[1]["content"]).splitlines()[:12]:
        print(f"    {line[:100]}")


if __name__ == "__main__":
    main()
