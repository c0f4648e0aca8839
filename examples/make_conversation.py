"""Generate examples/support_conversation.json: a long, realistic support-agent session.

Deterministic (seeded), so the committed file can be regenerated exactly:

    python examples/make_conversation.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SYSTEM = (
    "You are Ada, the support agent of Northwind Outfitters, an online shop for outdoor "
    "gear. Be concise and friendly. Use the tools to look up orders, shipments and "
    "refunds; never invent order data. Escalate to a human when a refund exceeds $500."
)

CUSTOMERS = ["Maya Chen", "Jonas Weber", "Priya Raman", "Tom Okafor", "Lena Novak"]
PRODUCTS = [
    ("trail running shoes", 129.00),
    ("a 2-person tent", 349.50),
    ("a down sleeping bag", 219.99),
    ("trekking poles", 64.25),
    ("a waterproof shell jacket", 289.00),
    ("a headlamp", 39.90),
]
CITIES = ["Lisbon", "Denver", "Oslo", "Toronto", "Kyoto"]
CARRIERS = ["UPS", "DHL", "FedEx"]

OPENERS = [
    "Hi, my order {order} hasn't arrived yet. It was supposed to come on {date}.",
    "Hello! Can you check the status of order {order}? I ordered {product}.",
    "I received {product} from order {order} but it's the wrong size.",
    "My package for order {order} says delivered but I never got it.",
    "Could I get a refund for order {order}? The {product_short} broke after a week.",
]
FOLLOW_UPS = [
    "Thanks. Can you send it to my office in {city} instead?",
    "How long will the replacement take?",
    "I prefer email updates, please don't call me.",
    "Okay, and will I be charged for the return shipping?",
    "Great, that works for me. My email is {email}.",
    "Is there a discount code for the trouble? I've been a customer since 2019.",
]
SMALL_TALK = [
    "By the way, do you have the trekking poles in blue?",
    "I'm going hiking in the Dolomites next month, any advice on layers?",
    "Your website was down this morning, just so you know.",
]


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def build(seed: int = 42, sessions: int = 24) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    call_n = 0
    for s in range(sessions):
        name = CUSTOMERS[s % len(CUSTOMERS)]
        order = f"{rng.randint(1000, 9999)}"
        product, price = rng.choice(PRODUCTS)
        product_short = product.split()[-1]
        city = rng.choice(CITIES)
        date = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"
        email = name.lower().replace(" ", ".") + "@example.com"
        fill = {
            "order": order,
            "date": date,
            "product": product,
            "product_short": product_short,
            "city": city,
            "email": email,
        }
        out.append(
            {"role": "user", "content": f"This is {name}. " + rng.choice(OPENERS).format(**fill)}
        )
        out.append(
            {
                "role": "assistant",
                "content": f"Thanks {name.split()[0]}, let me look up order {order}.",
            }
        )
        call_n += 1
        lookup = f"call_{call_n:04d}"
        ship = f"call_{call_n:04d}b"
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call(lookup, "lookup_order", {"order_id": order}),
                    _call(ship, "track_shipment", {"order_id": order}),
                ],
            }
        )
        status = rng.choice(["in transit", "delayed at customs", "delivered", "processing"])
        carrier = rng.choice(CARRIERS)
        out.append(
            {
                "role": "tool",
                "tool_call_id": ship,
                "content": json.dumps(
                    {"carrier": carrier, "status": status, "last_scan": city, "eta": date}
                ),
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": lookup,
                "content": json.dumps(
                    {"order_id": order, "customer": name, "item": product, "total_usd": price}
                ),
            }
        )
        out.append(
            {
                "role": "assistant",
                "content": (
                    f"Order {order} ({product}, ${price:.2f}) is {status} with {carrier}; "
                    f"the last scan was in {city}. "
                    + (
                        "I can start a replacement or a refund, whichever you prefer."
                        if status in ("delayed at customs", "delivered")
                        else "It should reach you soon; I'll keep an eye on it."
                    )
                ),
            }
        )
        for _ in range(rng.randint(2, 4)):
            out.append({"role": "user", "content": rng.choice(FOLLOW_UPS).format(**fill)})
            out.append(
                {
                    "role": "assistant",
                    "content": rng.choice(
                        [
                            "Done. I've noted that on your account.",
                            "Of course. Replacements usually ship within 2 business days.",
                            "Return shipping is free for defective items.",
                            f"I've updated the delivery address to {city}.",
                            "I've added a 10% discount code to your account: SORRY10.",
                        ]
                    ),
                }
            )
        if rng.random() < 0.6:
            call_n += 1
            refund = f"call_{call_n:04d}"
            out.append({"role": "user", "content": "Please go ahead with the refund."})
            out.append(
                {
                    "role": "assistant",
                    "content": "Issuing the refund now.",
                    "tool_calls": [
                        _call(refund, "issue_refund", {"order_id": order, "amount_usd": price})
                    ],
                }
            )
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": refund,
                    "content": json.dumps({"refund_id": f"R-{order}", "status": "approved"}),
                }
            )
            out.append(
                {
                    "role": "assistant",
                    "content": f"Refund R-{order} for ${price:.2f} is approved; it takes 3-5 days.",
                }
            )
        if rng.random() < 0.4:
            out.append({"role": "user", "content": rng.choice(SMALL_TALK)})
            out.append(
                {
                    "role": "assistant",
                    "content": "Good question! Merino base layers and a light fleece work well; "
                    "the trekking poles come in black and blue.",
                }
            )
        out.append({"role": "user", "content": "That's all, thank you!"})
        out.append(
            {
                "role": "assistant",
                "content": f"You're welcome, {name.split()[0]}. Have a great day!",
            }
        )
    return out


def main() -> None:
    path = Path(__file__).with_name("support_conversation.json")
    path.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
