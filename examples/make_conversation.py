"""Generate examples/support_conversation.json: one customer's long support thread.

Maya Chen ordered a tent, a sleeping bag and trail shoes (order 4417) for a hiking trip
to the Dolomites. Over six weeks she checks in with Ada, Northwind Outfitters' support
agent: the parcel is held at customs, the shoes come in the wrong size, the tent goes
missing and is replaced, trekking poles are added, a refund is paid, and after the trip
the sleeping bag's zipper is repaired under warranty. Her last question needs the
oldest facts (the office address and her email-only preference).

Deterministic (seeded), so the committed file can be regenerated exactly:

    python examples/make_conversation.py
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

SYSTEM = (
    "You are Ada, the support agent of Northwind Outfitters, an online shop for outdoor "
    "gear. Be concise and friendly. Use the tools to look up orders, shipments, returns "
    "and refunds; never invent order data. Escalate to a human when a refund exceeds $500."
)

START = date(2026, 5, 18)
CHECK_INS = [
    "Hi Ada, any news on order 4417?",
    "Morning! Where is my parcel today?",
    "Hello again. Could you check the tracking for me?",
    "Any update on the shipment?",
    "Hi, it's Maya. Has anything moved since yesterday?",
    "Quick check: where is the package now?",
    "Hey Ada, is it still on schedule?",
]
SMALL_TALK = [
    (
        "What layers would you pack for the Dolomites in mid-June?",
        "A merino base layer, a light fleece and a waterproof shell cover most days; nights "
        "at the huts can drop to 5°C, so bring a warm hat too.",
    ),
    (
        "How warm is the down sleeping bag, exactly?",
        "It has a comfort rating of 2°C and a limit of -4°C, which suits June nights "
        "in the mountains.",
    ),
    (
        "Is the tent easy to pitch alone?",
        "Yes: it has a single hub pole and colour-coded clips; most people pitch it alone "
        "in about five minutes.",
    ),
    (
        "Should I waterproof the tent before the trip?",
        "It comes with a fresh coating, so no need; just pitch it once at home to check "
        "that every part is there.",
    ),
    (
        "Do you sell gas canisters for camping stoves?",
        "We can't ship gas canisters; the rifugi and outdoor shops in Cortina sell them.",
    ),
    (
        "Your website was slow this morning, just so you know.",
        "Thanks for telling me; I've passed it on to our web team.",
    ),
    (
        "Can I wash the sleeping bag in a machine?",
        "Yes, on a gentle cycle with a down wash, then tumble-dry low with two clean "
        "tennis balls to restore the loft.",
    ),
    (
        "What's the weight of the tent, packed?",
        "It weighs 1.9 kg packed, poles and pegs included.",
    ),
    (
        "Do the trail shoes need breaking in?",
        "A few short walks are enough; they use a soft upper that needs little breaking in.",
    ),
    (
        "Is there a store in Denver where I could pick things up?",
        "Not yet, we ship only; our nearest partner store is in Boulder.",
    ),
    (
        "Which headlamp would you take to the huts?",
        "Our 400-lumen headlamp ($39.90) runs 40 hours on low and weighs 88 g.",
    ),
    (
        "How much water should I carry between huts?",
        "Two litres is usually enough in June; most huts sell water and there are springs "
        "on the Alta Via 1.",
    ),
    (
        "Do I need a liner for the sleeping bag in the huts?",
        "Yes, Italian rifugi require a sleeping-bag liner; a silk one weighs about 120 g.",
    ),
    (
        "Can the tent take strong wind on a ridge?",
        "It is rated for gusts up to 60 km/h with all guy lines out; pitch it behind rocks "
        "when you can.",
    ),
    (
        "What's your return window, in case I don't use something?",
        "Unused items can be returned within 60 days, and returns are free for members.",
    ),
    (
        "Do you have a repair service for outdoor gear?",
        "Yes, our Denver workshop repairs zips, seams and poles; warranty repairs are free.",
    ),
]
THANKS = [
    ("Thanks, Ada.", "You're welcome, Maya!"),
    ("Okay, thank you.", "Any time. I'll keep an eye on it."),
    ("Great, talk tomorrow.", "Talk tomorrow, Maya."),
    ("Perfect, thanks!", "Glad to help."),
]


class Thread:
    """Builds the message list, numbering tool calls as it goes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.calls = 0

    def user(self, text: str) -> None:
        self.out.append({"role": "user", "content": text})

    def assistant(self, text: str) -> None:
        self.out.append({"role": "assistant", "content": text})

    def tools(self, text: str | None, *calls: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
        """An assistant turn calling tools in parallel, then one result per call."""
        ids = []
        for _ in calls:
            self.calls += 1
            ids.append(f"call_{self.calls:04d}")
        self.out.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for call_id, (name, args, _) in zip(ids, calls, strict=True)
                ],
            }
        )
        for call_id, (_, _, result) in zip(ids, calls, strict=True):
            content = json.dumps(result)
            self.out.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def track(self, day: date, parcels: list[tuple[str, str, str]]) -> None:
        """Check-in: the customer asks, Ada tracks each parcel, then sums up."""
        self.user(self.rng.choice(CHECK_INS))
        self.tools(
            None,
            *(
                (
                    "track_shipment",
                    {"tracking_id": tid},
                    {"tracking_id": tid, "status": status, "last_scan": where, "date": str(day)},
                )
                for tid, status, where in parcels
            ),
        )
        lines = [f"{tid} is {status} (last scan: {where})" for tid, status, where in parcels]
        self.assistant("As of today, " + "; ".join(lines) + ".")


def build(seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    t = Thread(rng)
    talk = rng.sample(SMALL_TALK, len(SMALL_TALK))

    # Day 0: the order, the trip, the preferences.
    t.user(
        "Hi, this is Maya Chen. My order 4417 hasn't arrived and I'm leaving for a hike "
        "in the Dolomites on June 14. Can you check it?"
    )
    t.tools(
        "Let me look up order 4417.",
        (
            "lookup_order",
            {"order_id": "4417"},
            {
                "order_id": "4417",
                "customer": "Maya Chen",
                "items": [
                    {"sku": "TENT-2P", "name": "2-person tent", "usd": 349.50},
                    {"sku": "BAG-DOWN", "name": "down sleeping bag", "usd": 219.99},
                    {"sku": "SHOE-TR-38", "name": "trail running shoes, EU 38", "usd": 129.00},
                ],
                "total_usd": 698.49,
                "parcels": ["NW-4417-A", "NW-4417-B"],
            },
        ),
        (
            "track_shipment",
            {"tracking_id": "NW-4417-A"},
            {"tracking_id": "NW-4417-A", "status": "held at customs", "last_scan": "Lisbon"},
        ),
    )
    t.assistant(
        "Order 4417 has three items in two parcels: the tent and the sleeping bag "
        "(NW-4417-A) are held at customs in Lisbon, and the shoes (NW-4417-B) ship "
        "separately. June 14 is tight but doable; I'll follow it daily."
    )
    t.user("I prefer email updates, please never call me: I'm at work all day.")
    t.tools(
        None,
        (
            "set_contact_preference",
            {"customer": "Maya Chen", "channel": "email", "email": "maya.chen@example.com"},
            {"ok": True, "channel": "email", "email": "maya.chen@example.com"},
        ),
    )
    t.assistant("Done: updates go to maya.chen@example.com only, and nobody will call you.")
    t.user("And my delivery address is now my office: 1550 Larimer St, Denver, CO 80202.")
    t.tools(
        None,
        (
            "update_address",
            {"order_id": "4417", "address": "1550 Larimer St, Denver, CO 80202"},
            {"ok": True, "order_id": "4417", "address": "1550 Larimer St, Denver, CO 80202"},
        ),
    )
    t.assistant("The delivery address of order 4417 is now 1550 Larimer St, Denver, CO 80202.")

    a_route = ["held at customs"] * 3 + ["cleared customs", "in transit", "in transit"]
    a_route += ["at the Denver facility", "out for delivery", "delivered"]
    a_where = ["Lisbon"] * 4 + ["Newark", "Memphis", "Denver", "Denver", "Denver"]
    b_route = ["in transit", "delivered"]
    shoes2 = ["in transit", "in transit", "delivered"]
    tent2 = ["label created", "in transit", "in transit", "at the Denver facility"]
    tent2 += ["out for delivery", "delivered"]
    repair = ["label created", "in transit", "at the Denver workshop", "repaired"]
    repair += ["in transit", "out for delivery", "delivered"]
    for d in range(1, 46):
        day = START + timedelta(days=d)
        said = len(t.out)
        parcels: list[tuple[str, str, str]] = []
        if d <= len(a_route):
            parcels.append(("NW-4417-A", a_route[d - 1], a_where[d - 1]))
        if d <= len(b_route):
            parcels.append(("NW-4417-B", b_route[d - 1], "Denver"))
        if 5 <= d < 5 + len(shoes2):
            parcels.append(("NW-4417-C", shoes2[d - 5], "Denver"))
        if 10 <= d < 10 + len(tent2):
            parcels.append(("NW-4417-D", tent2[d - 10], "Memphis" if d < 13 else "Denver"))
        if 35 <= d < 35 + len(repair):
            parcels.append(("NW-W7730", repair[d - 35], "Denver"))
        if parcels:
            t.track(day, parcels)
        if d == 2:
            t.user("The shoes arrived, but they are EU 40 and I ordered 38. Can I exchange them?")
            t.tools(
                "Sorry about that! Let me set up an exchange.",
                (
                    "create_return",
                    {"order_id": "4417", "sku": "SHOE-TR-38", "reason": "wrong size (EU 40)"},
                    {"return_id": "RT-5521", "label": "emailed", "replacement": "NW-4417-C"},
                ),
            )
            t.assistant(
                "Exchange RT-5521 is open: the return label went to maya.chen@example.com, "
                "and the EU 38 pair ships as NW-4417-C before we receive the others."
            )
        if d == 7:
            t.user("The new shoes fit perfectly, thank you.")
            t.assistant("Wonderful! Exchange RT-5521 is closed.")
        if d == 9:
            t.user(
                "The parcel came but there was only the sleeping bag inside. The tent is missing!"
            )
            t.tools(
                "I'm sorry, Maya. Let me open a claim and send a new tent by express.",
                (
                    "open_claim",
                    {"order_id": "4417", "sku": "TENT-2P", "issue": "missing from parcel"},
                    {"claim_id": "C-2291", "status": "approved"},
                ),
                (
                    "ship_replacement",
                    {"order_id": "4417", "sku": "TENT-2P", "service": "express"},
                    {"tracking_id": "NW-4417-D", "eta": "2026-06-02"},
                ),
            )
            t.assistant(
                "Claim C-2291 is approved and a new tent ships by express as NW-4417-D, "
                "due June 2, well before your June 14 trip."
            )
        if d == 12:
            t.user("While we wait: do you have the trekking poles in blue? I need a pair.")
            t.tools(
                None,
                (
                    "check_stock",
                    {"sku": "POLE-TREK", "color": "blue"},
                    {"sku": "POLE-TREK", "color": "blue", "in_stock": 14, "usd": 64.25},
                ),
            )
            t.assistant("Yes, 14 pairs of the blue trekking poles are in stock, at $64.25.")
            t.user("Please add a pair and ship them with the tent if you can.")
            t.tools(
                None,
                (
                    "create_order",
                    {"customer": "Maya Chen", "sku": "POLE-TREK", "color": "blue"},
                    {"order_id": "4532", "usd": 64.25, "ships_with": "NW-4417-D"},
                ),
            )
            t.assistant("Order 4532 (blue trekking poles, $64.25) ships with your new tent.")
        if d == 15:
            t.user(
                "The tent and the poles are here! Given all the trouble, could you refund "
                "the shipping fee?"
            )
            t.tools(
                "Of course. Refunding the $14.95 shipping fee of order 4417.",
                (
                    "issue_refund",
                    {"order_id": "4417", "amount_usd": 14.95, "reason": "missing tent"},
                    {"refund_id": "R-4417-1", "status": "approved", "days": "3-5"},
                ),
            )
            t.assistant(
                "Refund R-4417-1 of $14.95 is approved and reaches your card in 3-5 days. "
                "I've also added a 10% discount code to your account: SORRY10."
            )
        if d == 20:
            t.user("Could you email me the invoice for order 4417? My company reimburses gear.")
            t.tools(
                None,
                (
                    "send_invoice",
                    {"order_id": "4417", "email": "maya.chen@example.com"},
                    {"sent": True, "email": "maya.chen@example.com"},
                ),
            )
            t.assistant("The invoice for order 4417 is on its way to maya.chen@example.com.")
        if d == 18:
            t.user("Did the refund R-4417-1 go through?")
            t.tools(
                None,
                (
                    "check_refund",
                    {"refund_id": "R-4417-1"},
                    {"refund_id": "R-4417-1", "status": "completed", "usd": 14.95},
                ),
            )
            t.assistant("Yes, refund R-4417-1 ($14.95) was completed; it is on your card.")
        if d == 28:
            t.user(
                "Greetings from Rifugio Lagazuoi! The trip is amazing, but the zipper of the "
                "sleeping bag broke last night."
            )
            t.tools(
                "Oh no! The bag is under warranty; let me register a claim.",
                (
                    "open_warranty_claim",
                    {"order_id": "4417", "sku": "BAG-DOWN", "issue": "broken zipper"},
                    {"claim_id": "W-7730", "status": "open", "repair": "free"},
                ),
            )
            t.assistant(
                "Warranty claim W-7730 is open: the repair is free. Send the bag back when "
                "you're home; until then a safety pin at the top of the zip keeps it closed."
            )
        if d == 34:
            t.user("I'm back in Denver. How do I send the sleeping bag for the zipper repair?")
            t.tools(
                None,
                (
                    "create_label",
                    {"claim_id": "W-7730", "from": "1550 Larimer St, Denver, CO 80202"},
                    {"tracking_id": "NW-W7730", "label": "emailed"},
                ),
            )
            t.assistant(
                "The prepaid label for claim W-7730 is in your email (maya.chen@example.com); "
                "the parcel is tracked as NW-W7730 and comes back to your office."
            )
        if d == 41:
            t.user("The sleeping bag is back and the zipper works perfectly.")
            t.tools(
                None,
                ("close_claim", {"claim_id": "W-7730"}, {"claim_id": "W-7730", "status": "closed"}),
            )
            t.assistant("Great to hear! Warranty claim W-7730 is closed.")
        if d % 2 == 0 and talk and not 28 < d < 34:
            question, answer = talk.pop()
            t.user(question)
            t.assistant(answer)
        if len(t.out) > said and rng.random() < 0.7:
            thanks, reply = rng.choice(THANKS)
            t.user(thanks)
            t.assistant(reply)
    t.user(
        "One last thing before I close this chat: is anything still open on my account, "
        "and which address and contact preference do you have for me?"
    )
    return t.out


def main() -> None:
    path = Path(__file__).with_name("support_conversation.json")
    path.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
