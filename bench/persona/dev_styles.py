"""The DEVELOPMENT set of facts about a user, in eight styles: the rules are tuned on it.

Same shape as ``heldout_styles`` (read its docstring); other values, other phrasings.
"""

from __future__ import annotations

from typing import Any

NEG = ["never", "not", "no", "avoid*", "dislike*", "don't", "do not", "doesn't", "can't", "hate*"]

POOLS: dict[str, list[str]] = {
    "first": ["Maya", "Jonah", "Amara", "Lukas", "Sofia", "Ravi", "Elin", "Kofi"],
    "last": ["Chen", "Adeyemi", "Novak", "Moreau", "Castillo", "Hartmann"],
    "wrong_last": ["Chan", "Adeyeme", "Nowak", "Moreaux", "Castilla", "Hartman"],
    "city": ["Denver", "Rotterdam", "Nairobi", "Valencia", "Halifax", "Kraków", "Austin"],
    "old_city": ["Boulder", "Utrecht", "Mombasa", "Seville", "Moncton", "Gdańsk", "Houston"],
    "street": ["1550 Larimer St", "40 Canal Street", "9 Ngong Road", "310 Quinpool Road"],
    "old_street": ["12 Pearl Street", "77 Oak Avenue", "5 Market Lane", "230 Spring Garden"],
    "zip": ["80302", "10027", "98103", "30306", "55408"],
    "wrong_zip": ["80320", "10072", "98130", "30360", "55480"],
    "phone": ["+1 720 555 0142", "(617) 555-0199", "+31 6 1234 5678", "+254 712 345 678"],
    "old_phone": ["(303) 555-0170", "+1 646 555 0123", "+31 6 8765 4321", "+254 733 000 111"],
    "account": ["ACC-10293", "CUST-4471", "PL-88302", "MB-55120"],
    "member": ["FIT-3391", "LIB-77812", "CLUB-2045", "PASS-9013"],
    "pet": ["Waffles", "Juniper", "Pepper", "Rocket", "Mango", "Bruno"],
    "breed": ["labrador", "poodle", "corgi", "husky", "greyhound"],
    "cat": ["Luna", "Miso", "Pixel", "Tofu", "Ginger"],
    "sister": ["Priya", "Camille", "Hana", "Zara", "Lotte"],
    "spouse": ["Daniel", "Amina", "Marco", "Yusuf", "Ingrid"],
    "son": ["Theo", "Omar", "Leon", "Nico", "Kai"],
    "landlord": ["Mr. Brooks", "Mrs. Tanaka", "Mr. Ivanov", "Ms. Okoye"],
    "boss": ["Helen Park", "Samuel Osei", "Carla Ruiz", "Dmitri Volkov"],
    "job": ["data analyst", "high school teacher", "UX designer", "electrician", "midwife"],
    "employer": ["Acme Robotics", "Blue Harbor Bank", "Crestview Clinic", "Lumen Studios"],
    "old_employer": ["Globex", "Initech", "Stark Foods", "Wayfarer Travel"],
    "allergen": ["tree nuts", "dairy", "gluten", "eggs", "soy", "aspirin"],
    "allergen2": ["cats", "pollen", "codeine", "mango"],
    "diet": ["vegan", "vegetarian", "pescatarian"],
    "condition": ["migraines", "high blood pressure", "epilepsy", "eczema"],
    "food": ["beef", "coriander", "blue cheese", "anchovies", "tofu"],
    "dislike": ["country music", "early meetings", "cold weather", "spicy food"],
    "like": ["rock climbing", "jazz piano", "gardening", "trail running", "pottery"],
    "drink": ["black coffee", "chai", "kombucha"],
    "carrier": ["T-Mobile", "KPN", "Safaricom", "Bell"],
    "old_carrier": ["AT&T", "Ziggo", "Airtel", "Telus"],
    "nick": ["Mimi", "Jo", "Ama", "Luke", "Sofi", "Rav"],
    "trip_city": ["Lisbon", "Kyoto", "Cape Town", "Buenos Aires"],
    "bank": ["Chase", "ING", "Barclays", "N26"],
    "flat": ["3A", "15", "9B", "42"],
    "wrong_flat": ["3B", "51", "9D", "24"],
    "time": ["9:45", "3:15", "5:30"],
    "wrong_time": ["9:15", "2:15", "6:30"],
}

WHEN: dict[str, list[str]] = {
    "future": ["tomorrow", "next Friday", "this Wednesday", "in two days", "in three weeks"],
    "past": ["yesterday", "last Friday", "three weeks ago", "two days ago", "last Tuesday"],
}

H = list[tuple[str, list[list[str]]]]


def _t(say: str, facts: H, **extra: Any) -> dict[str, Any]:
    return {"say": say, "facts": facts, **extra}


STYLES: dict[str, list[dict[str, Any]]] = {
    "direct": [
        _t("Hi, I'm {full}.", [("name", [["{full}"]])]),
        _t("You can email me at {email}.", [("email", [["{email}"]])]),
        _t("My phone number is {phone}.", [("phone", [["{phone}"]])]),
        _t("I'm based in {city}.", [("city", [["{city}"]])]),
        _t("I'm a {job}.", [("job", [["{job}"]])]),
        _t("I have a {allergen} allergy.", [("allergy", [["{allergen}"], ["allerg*"]])]),
        _t("I eat {diet}.", [("diet", [["{diet}"]])]),
        _t("I really enjoy {like}.", [("like", [["{like}"]])]),
        _t("I bank with {bank}.", [("bank", [["{bank}"]])]),
    ],
    "clause": [
        _t(
            "I live in {city} and I'm allergic to {allergen}, so eating out is tricky.",
            [("city", [["{city}"]]), ("allergy", [["{allergen}"], ["allerg*"]])],
        ),
        _t(
            "Work has been busy because I'm a {job} at {employer} and it's audit season.",
            [("job", [["{job}"]]), ("employer", [["{employer}"]])],
        ),
        _t(
            "I skipped the gym since I get {condition} when I don't sleep enough.",
            [("condition", [["{condition}"]])],
        ),
        _t(
            "I walked to the library, and my card number is {member} in case you need it.",
            [("member", [["{member}"]])],
        ),
        _t(
            "On Sundays I do {like}, and that's my favourite part of the week.",
            [("like", [["{like}"]])],
        ),
        _t(
            "Please ship to {street} because that's where I live, and ring twice.",
            [("address", [["{street}"]])],
        ),
        _t(
            "I was drinking {drink} when I noticed my email {email} got the invoice.",
            [("email", [["{email}"]])],
        ),
    ],
    "negation": [
        _t("Never phone me, please; email only.", [("no_call", [["call", "phone"], NEG])]),
        _t("Please don't send me text messages.", [("no_text", [["text", "sms"], NEG])]),
        _t("I never eat {food}.", [("food", [["{food}"], NEG])]),
        _t("I don't use Telegram, so skip that.", [("no_telegram", [["telegram"], NEG])]),
        _t("Don't call me after 8 pm.", [("call_time", [["8"], ["call"]])]),
        _t("I don't drink coffee.", [("coffee", [["coffee"], NEG])]),
        _t("I really dislike {dislike}.", [("dislike", [["{dislike}"], NEG])]),
    ],
    "change": [
        _t(
            "I moved to {city} from {old_city} in the spring.",
            [("city", [["{city}"]])],
            before="I'm based in {old_city}.",
            stale="{old_city}",
        ),
        _t(
            "I changed my mobile provider from {old_carrier} to {carrier}.",
            [("carrier", [["{carrier}"]])],
            before="My mobile provider is {old_carrier}.",
            stale="{old_carrier}",
        ),
        _t(
            "I quit {old_employer} and started at {employer} last week.",
            [("employer", [["{employer}"]])],
            before="I work for {old_employer}.",
            stale="{old_employer}",
        ),
        _t(
            "I have a new phone number: {phone}.",
            [("phone", [["{phone}"]])],
            before="My number is {old_phone}.",
            stale="{old_phone}",
        ),
        _t(
            "My address changed, it's now {street}.",
            [("address", [["{street}"]])],
            before="I live at {old_street}.",
            stale="{old_street}",
        ),
        _t("I went {diet} last year.", [("diet", [["{diet}"]])]),
    ],
    "possessive": [
        _t("My dog {pet} is a {breed}.", [("pet", [["{pet}"]]), ("breed", [["{breed}"]])]),
        _t("My sister {sister} is visiting next month.", [("sister", [["{sister}"]])]),
        _t("My wife, {spouse}, does the taxes.", [("spouse", [["{spouse}"]])]),
        _t("My landlord {landlord} raised the rent.", [("landlord", [["{landlord}"]])]),
        _t("I have a cat named {cat}.", [("cat", [["{cat}"]])]),
        _t("My customer number is {account}.", [("account", [["{account}"]])]),
        _t("My son, {son}, plays football.", [("son", [["{son}"]])]),
    ],
    "date": [
        _t("I have a dentist appointment {when:future}.", [("dentist", [["dentist"], ["{when}"]])]),
        _t("I started at the new place {when:past}.", [("started", [["start*"], ["{when}"]])]),
        _t("I fly to {trip_city} {when:future}.", [("flight", [["{trip_city}"], ["{when}"]])]),
        _t("It's my birthday {when:future}.", [("birthday", [["birthday"], ["{when}"]])]),
        _t(
            "The electrician is coming {when:future}.",
            [("electrician", [["electrician"], ["{when}"]])],
        ),
        _t("I sprained my ankle {when:past}.", [("ankle", [["ankle"], ["{when}"]])]),
    ],
    "correction": [
        _t(
            "Sorry, my mistake: the zip is {zip}, not {wrong_zip}.",
            [("zip", [["{zip}"]])],
            before="My zip is {wrong_zip}.",
            stale="{wrong_zip}",
        ),
        _t(
            "Sorry, I misspelled it: it's {first} {last}.",
            [("name", [["{first} {last}"]])],
            before="I'm {first} {wrong_last}.",
            stale="{first} {wrong_last}",
        ),
        _t(
            "Correction, it's apartment {flat}.",
            [("flat", [["{flat}"]])],
            before="My apartment is {wrong_flat}.",
            stale="{wrong_flat}",
        ),
        _t(
            "Actually, the meeting is at {time}, not {wrong_time}.",
            [("meeting_time", [["{time}"]])],
            before="My meeting with the bank is at {wrong_time}.",
            stale="{wrong_time}",
        ),
        _t(
            "Actually, use {email} instead, the other one is old.",
            [("email", [["{email}"]])],
            before="My email is {first}.old@example.net.",
            stale="{first}.old@example.net",
        ),
    ],
    "indirect": [
        _t("My doctor told me I have {condition}.", [("condition", [["{condition}"]])]),
        _t("My friends call me {nick}.", [("nickname", [["{nick}"]])]),
        _t(
            "My husband says I'm allergic to {allergen2}, and he's right.",
            [("allergy2", [["{allergen2}"], ["allerg*"]])],
        ),
        _t("The lease is in my wife's name, {spouse} {last}.", [("holder", [["{spouse} {last}"]])]),
        _t("My boss is {boss}, she signs off on expenses.", [("boss", [["{boss}"]])]),
        _t("My colleagues know I'm a {job} by training.", [("job", [["{job}"]])]),
        _t("My kids know I can't stand {food}.", [("food", [["{food}"], NEG])]),
    ],
}

DISTRACTORS: list[str] = [
    "My friend Tomasz just got back from Nairobi.",
    "A coworker, Beatriz, is relocating to Valencia.",
    "We saw a film set in Halifax last night.",
    "My neighbor's dog, Rufus, dug up the garden again.",
    "Someone named Gerald left a voicemail for Denise.",
    "My aunt's cafe in Austin is doing well.",
    "There's a new bakery on Canal Street.",
    "Our manager, Ingeborg, is on leave until Friday.",
    "I read that Rotterdam is building a floating farm.",
    "My friend Chidi joined a choir on Tuesdays.",
]
