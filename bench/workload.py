"""A deterministic, realistic agent conversation for benchmarks (the same for every library).

One system prompt, then turns: a user asks, the assistant either answers or calls one to
three tools (parallel calls answered in order), reads the results and answers. Texts are
built from a fixed vocabulary with a seeded RNG, with some near-duplicate user messages
and tool results (people repeat themselves; agents poll the same tool), so the same
workload serves the dedup benchmark.

Prefix property: ``openai_messages(n)[:k] == openai_messages(k)`` for every ``k <= n``,
so an agent loop can take the first ``N`` messages as the history and append the next ones
turn by turn. The last message of a cut may be a tool call whose results come later,
exactly as in a live agent loop.

    python bench/workload.py            # prints size and token statistics
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from convomem.formats.openai import from_openai
from convomem.model import Message

SIZES = (1_000, 5_000, 20_000, 100_000)
"""History sizes the benchmarks use."""

SYSTEM_PROMPT = (
    "You are Atlas, an operations assistant for a mid-sized online retailer. You can look "
    "up orders, customers, inventory and shipments with the tools provided, and you must "
    "confirm destructive actions (refunds, cancellations) with the user before calling "
    "the tool. Answer concisely, cite order numbers, and never invent data a tool did not "
    "return. When a tool fails, say so and suggest the next step."
)

_VOCABULARY = (
    "order shipment customer invoice refund warehouse carrier tracking delay package "
    "address inventory stock return exchange discount coupon payment card balance "
    "account email phone delivery pickup label weight dimension supplier restock "
    "priority express standard ground freight customs status update escalate ticket "
    "agent policy window warranty damaged missing wrong size color quantity total "
    "subtotal tax currency region store online checkout cart session password reset "
    "the a to of and for with on in is was will be can please thanks today tomorrow "
    "yesterday week month early late again still now soon already never always"
)
_WORDS = tuple(_VOCABULARY.split())

_TOOLS = {
    "get_order": ("order_id",),
    "search_orders": ("customer_email", "status"),
    "get_shipment": ("tracking_number",),
    "check_inventory": ("sku", "warehouse"),
    "issue_refund": ("order_id", "amount"),
    "get_customer": ("customer_id",),
}

_REPEATS = (
    "thanks!",
    "ok, can you check again?",
    "Is there any update on my order?",
    "Is there any update on my order yet?",
    "please hurry, this is urgent",
)


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(lo, hi))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(".?!.")


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, 6, 18) for _ in range(sentences))


def _tool_args(rng: random.Random, tool: str) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key in _TOOLS[tool]:
        if key == "amount":
            args[key] = round(rng.uniform(5, 500), 2)
        elif key == "customer_email":
            args[key] = f"user{rng.randint(1, 5000)}@example.com"
        elif key == "status":
            args[key] = rng.choice(["open", "shipped", "delayed", "returned"])
        else:
            args[key] = f"{key[:3].upper()}-{rng.randint(10_000, 99_999)}"
    return args


def _tool_result(rng: random.Random, tool: str, args: dict[str, Any]) -> str:
    if rng.random() < 0.15:  # agents poll: the same status payload comes back often
        return json.dumps({"tool": tool, "status": "pending", "retry_after_s": 30})
    rows = [
        {
            "id": f"R{rng.randint(100_000, 999_999)}",
            "state": rng.choice(["ok", "delayed", "in_transit", "delivered", "backorder"]),
            "note": _sentence(rng, 5, 14),
            "qty": rng.randint(1, 9),
        }
        for _ in range(rng.choice((1, 1, 2, 3, 6, 12)))
    ]
    return json.dumps({"tool": tool, "args": args, "rows": rows})


def _turns(seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    call_no = 0
    yield {"role": "system", "content": SYSTEM_PROMPT}
    while True:
        if rng.random() < 0.12:
            user = rng.choice(_REPEATS)
        else:
            user = _paragraph(rng, rng.choice((1, 1, 2, 3)))
        yield {"role": "user", "content": user}
        for _ in range(rng.choice((0, 1, 1, 2))):  # tool rounds in this turn
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                call_no += 1
                tool = rng.choice(sorted(_TOOLS))
                args = _tool_args(rng, tool)
                calls.append((f"call_{call_no:07d}", tool, args))
            yield {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                    for cid, tool, args in calls
                ],
            }
            for cid, tool, args in calls:
                yield {
                    "role": "tool",
                    "tool_call_id": cid,
                    "content": _tool_result(rng, tool, args),
                }
        yield {"role": "assistant", "content": _paragraph(rng, rng.choice((1, 2, 3, 5, 8)))}


@lru_cache(maxsize=4)
def _cached(n: int, seed: int) -> tuple[dict[str, Any], ...]:
    out = []
    for i, msg in enumerate(_turns(seed)):
        if i >= n:
            break
        out.append(msg)
    return tuple(out)


def openai_messages(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """The first ``n`` messages of the conversation as fresh OpenAI Chat dicts."""
    if n < 0:
        raise ValueError(f"n={n!r}: must be non-negative")
    fresh: list[dict[str, Any]] = json.loads(json.dumps(_cached(n, seed)))
    return fresh  # fresh dicts: callers may mutate them


def messages(n: int, *, seed: int = 0) -> list[Message]:
    """The same conversation as convomem ``Message`` objects (via ``from_openai``)."""
    return from_openai(_cached(n, seed))


def _main() -> None:
    from convomem.tokens import get_tokenizer

    tok = get_tokenizer("approx")
    for n in SIZES[:3]:
        msgs = messages(n)
        total = tok.count_messages(msgs)
        tools = sum(1 for m in msgs if m.role == "tool")
        print(
            f"{n:>7} messages: {total:>9} approx tokens ({total / n:.0f}/msg), {tools} tool results"
        )


if __name__ == "__main__":
    _main()
