"""The HELD-OUT set of facts about a user, in eight styles: written before any rule was
tuned, and never tuned on. Figures on it are reported beside the development set's.

Shape (shared with ``dev_styles``; ``generate.py`` reads both the same way):

- ``POOLS``: the values a user's fields are drawn from (``{city}``, ``{pet}``...).
  ``{full}`` is ``{first} {last}``; ``{email}`` is made from the user's name.
- ``STYLES``: style -> templates. A template has ``say`` (the user's sentence; it is
  planted as the aside of a turn on ``topic``, or alone when ``alone`` is set),
  optionally ``before`` (said earlier: the old value of a change, or the wrong value a
  correction fixes in the very next user turn), ``facts``: ``[(slot, hold), ...]`` and
  optionally ``stale`` (the value that is no longer true). A user states each slot once.
  ``hold`` is a list of groups of strings: the fact is *held* by a context when one line
  of it contains, for every group, one of the group's strings (case-folded, as whole
  words; a trailing ``*`` makes it a prefix: ``allerg*``). Field
  names in braces are filled in; ``{when}`` is a relative date (``WHEN``), held as any
  date it can mean, written ISO, "March 3", "Mar 3" or "3 March".
- ``DISTRACTORS``: asides with other people's names, places and dates that are not facts
  about the user (they compete for the profile's share, as real chat does).
"""

from __future__ import annotations

from typing import Any

NEG = ["never", "not", "no", "avoid*", "dislike*", "don't", "do not", "doesn't", "can't", "hate*"]

POOLS: dict[str, list[str]] = {
    "first": ["Dana", "Tobias", "Ngozi", "Marisol", "Henrik", "Yuki", "Farid", "Colette"],
    "last": ["Okafor", "Lindqvist", "Bautista", "Kowalczyk", "Achterberg", "Nakashima"],
    "wrong_last": ["Okafur", "Lindquist", "Batista", "Kowalski", "Achtenberg", "Nakashina"],
    "city": ["Porto", "Accra", "Tromso", "Ljubljana", "Winnipeg", "Cusco", "Dunedin"],
    "old_city": ["Lisbon", "Kumasi", "Bergen", "Zagreb", "Calgary", "Arequipa", "Hobart"],
    "street": ["14 Rua das Flores", "221 Elmwood Avenue", "7 Kestrel Lane", "88 Harbor Road"],
    "old_street": ["3 Mill Street", "410 Pine Court", "19 Birch Row", "52 Quay Road"],
    "zip": ["80202", "94110", "60614", "02139", "73301"],
    "wrong_zip": ["80203", "94101", "60641", "02193", "73310"],
    "phone": ["+1 415 555 0134", "(303) 555-0187", "+44 20 7946 0321", "+351 912 345 678"],
    "old_phone": ["(720) 555-0110", "+1 312 555 0199", "+44 161 496 0742", "+351 913 000 111"],
    "account": ["AC-558201", "CU-77431", "M-4471-22", "ZX-900315"],
    "member": ["LIB-20931", "GYM-7724", "BK-55010", "CARD-88123"],
    "pet": ["Biscuit", "Pimento", "Rasmus", "Noodle", "Ziggy", "Clementine"],
    "breed": ["beagle", "whippet", "dachshund", "border collie", "basset hound"],
    "cat": ["Mochi", "Sardine", "Professor", "Tinsel", "Olive"],
    "sister": ["Anika", "Rosalind", "Teodora", "Ines", "Maren"],
    "spouse": ["Tomás", "Leila", "Graham", "Ifeoma", "Kenji"],
    "son": ["Milo", "Arjun", "Felix", "Kwame", "Lucas"],
    "landlord": ["Mr. Haddad", "Mrs. Petrov", "Mr. Alvarez", "Ms. Brennan"],
    "boss": ["Renata Silva", "Oskar Berg", "Priyanka Rao", "Walter Mensah"],
    "job": ["pharmacist", "civil engineer", "pediatric nurse", "sound technician", "welder"],
    "employer": ["Vantage Labs", "Northwind Freight", "Halcyon Health", "Bluefin Media"],
    "old_employer": ["Orbis Logistics", "Greenleaf Bank", "Copperline", "Tidewater Labs"],
    "allergen": ["peanuts", "shellfish", "penicillin", "sesame", "latex", "kiwi"],
    "allergen2": ["bee stings", "walnuts", "ibuprofen", "strawberries"],
    "diet": ["vegetarian", "vegan", "pescatarian"],
    "condition": ["type 1 diabetes", "asthma", "celiac disease", "a heart murmur"],
    "food": ["pork", "mushrooms", "cilantro", "eggplant", "olives"],
    "dislike": ["jazz", "horror movies", "crowded malls", "reality TV"],
    "like": ["bouldering", "sourdough baking", "birdwatching", "chess", "salsa dancing"],
    "drink": ["oat milk lattes", "green tea", "sparkling water"],
    "carrier": ["Mint Mobile", "Vodafone", "Telia", "Fido"],
    "old_carrier": ["Verizon", "Orange", "Tele2", "Rogers"],
    "nick": ["Dee", "Toby", "Goz", "Mari", "Rik", "Yu"],
    "trip_city": ["Marrakesh", "Reykjavik", "Osaka", "Montevideo"],
    "bank": ["Nordea", "Monzo", "Ally", "Revolut"],
    "flat": ["4B", "12", "7C", "21"],
    "wrong_flat": ["4D", "21", "7E", "12"],
    "time": ["4:30", "11:15", "2:45"],
    "wrong_time": ["3:30", "10:15", "1:45"],
}

WHEN: dict[str, list[str]] = {
    "future": ["tomorrow", "next Tuesday", "this Friday", "in three days", "in two weeks"],
    "past": ["yesterday", "last Monday", "two weeks ago", "three days ago", "last Thursday"],
}

H = list[tuple[str, list[list[str]]]]


def _t(say: str, facts: H, **extra: Any) -> dict[str, Any]:
    return {"say": say, "facts": facts, **extra}


STYLES: dict[str, list[dict[str, Any]]] = {
    "direct": [
        _t("My name is {full}.", [("name", [["{full}"]])]),
        _t("My email is {email}.", [("email", [["{email}"]])]),
        _t("My cell number is {phone}.", [("phone", [["{phone}"]])]),
        _t("I live in {city}.", [("city", [["{city}"]])]),
        _t("I work as a {job}.", [("job", [["{job}"]])]),
        _t("I'm allergic to {allergen}.", [("allergy", [["{allergen}"], ["allerg*"]])]),
        _t("I'm {diet}.", [("diet", [["{diet}"]])]),
        _t("I love {like}.", [("like", [["{like}"]])]),
        _t("My bank is {bank}.", [("bank", [["{bank}"]])]),
    ],
    "clause": [
        _t(
            "I'm allergic to {allergen} and live in {city}, so takeout is a whole project.",
            [("allergy", [["{allergen}"], ["allerg*"]]), ("city", [["{city}"]])],
        ),
        _t(
            "We had a long week, and since I work as a {job} at {employer}, I barely cooked.",
            [("job", [["{job}"]]), ("employer", [["{employer}"]])],
        ),
        _t(
            "It rained all day and my chest was tight again because I have {condition}, "
            "which is annoying.",
            [("condition", [["{condition}"]])],
        ),
        _t(
            "I don't own a car and ride everywhere, and my gym membership is {member} if "
            "that matters.",
            [("member", [["{member}"]])],
        ),
        _t(
            "Between work and {like}, which I do every weekend, there's not much time left.",
            [("like", [["{like}"]])],
        ),
        _t(
            "Send it to {street}, which is my home address, and leave it with the "
            "neighbor if I'm out.",
            [("address", [["{street}"]])],
        ),
        _t(
            "I usually drink {drink} in the morning and my email, {email}, gets the receipts.",
            [("email", [["{email}"]])],
        ),
    ],
    "negation": [
        _t(
            "Please never call me; I don't pick up unknown numbers.",
            [("no_call", [["call", "phone"], NEG])],
        ),
        _t(
            "Don't text me about deliveries, I'd rather check email.",
            [("no_text", [["text", "sms"], NEG])],
        ),
        _t("I don't eat {food} at all.", [("food", [["{food}"], NEG])]),
        _t(
            "I'm not on WhatsApp, so don't send anything there.",
            [("no_whatsapp", [["whatsapp"], NEG])],
        ),
        _t("No calls before 10 am, please.", [("call_time", [["10"], ["call"]])]),
        _t("I don't drink alcohol anymore.", [("alcohol", [["alcohol"], NEG])]),
        _t("I can't stand {dislike}.", [("dislike", [["{dislike}"], NEG])]),
    ],
    "change": [
        _t(
            "I moved from {old_city} to {city} last month.",
            [("city", [["{city}"]])],
            before="I live in {old_city}.",
            stale="{old_city}",
        ),
        _t(
            "I switched from {old_carrier} to {carrier} for my phone plan.",
            [("carrier", [["{carrier}"]])],
            before="My phone plan is with {old_carrier}.",
            stale="{old_carrier}",
        ),
        _t(
            "I left {old_employer} and joined {employer} in March.",
            [("employer", [["{employer}"]])],
            before="I work at {old_employer}.",
            stale="{old_employer}",
        ),
        _t(
            "My number changed, it's {phone} now.",
            [("phone", [["{phone}"]])],
            before="My phone number is {old_phone}.",
            stale="{old_phone}",
        ),
        _t(
            "We've moved house; the new address is {street}.",
            [("address", [["{street}"]])],
            before="My address is {old_street}.",
            stale="{old_street}",
        ),
        _t(
            "I used to eat meat but I'm {diet} now.",
            [("diet", [["{diet}"]])],
        ),
    ],
    "possessive": [
        _t("My dog {pet} is a {breed}.", [("pet", [["{pet}"]]), ("breed", [["{breed}"]])]),
        _t("My sister, {sister}, lives two streets away.", [("sister", [["{sister}"]])]),
        _t("My husband {spouse} handles the bills.", [("spouse", [["{spouse}"]])]),
        _t(
            "Our landlord, {landlord}, still hasn't fixed the heater.",
            [("landlord", [["{landlord}"]])],
        ),
        _t("My cat's name is {cat}.", [("cat", [["{cat}"]])]),
        _t("My account number, {account}, should be on file.", [("account", [["{account}"]])]),
        _t("My son {son} starts school in September.", [("son", [["{son}"]])]),
    ],
    "date": [
        _t("My dentist appointment is {when:future}.", [("dentist", [["dentist"], ["{when}"]])]),
        _t("I started the new job {when:past}.", [("started", [["start*"], ["{when}"]])]),
        _t(
            "My flight to {trip_city} is {when:future}.",
            [("flight", [["{trip_city}"], ["{when}"]])],
        ),
        _t("My birthday is {when:future}.", [("birthday", [["birthday"], ["{when}"]])]),
        _t("The plumber comes {when:future}.", [("plumber", [["plumber"], ["{when}"]])]),
        _t("I had knee surgery {when:past}.", [("surgery", [["surgery"], ["{when}"]])]),
    ],
    "correction": [
        _t(
            "Sorry, typo: it's {zip}, not {wrong_zip}.",
            [("zip", [["{zip}"]])],
            before="My zip code is {wrong_zip}.",
            stale="{wrong_zip}",
        ),
        _t(
            "Oops, autocorrect. It's {first} {last}.",
            [("name", [["{first} {last}"]])],
            before="My name is {first} {wrong_last}.",
            stale="{first} {wrong_last}",
        ),
        _t(
            "Wait, I meant flat {flat}.",
            [("flat", [["{flat}"]])],
            before="I'm in flat {wrong_flat}.",
            stale="{wrong_flat}",
        ),
        _t(
            "Actually, scratch that, the appointment is at {time}.",
            [("appointment_time", [["{time}"]])],
            before="My physio appointment is at {wrong_time}.",
            stale="{wrong_time}",
        ),
        _t(
            "Correction: my email is {email}, I gave you an old one.",
            [("email", [["{email}"]])],
            before="You can reach me at {first}.old@example.net.",
            stale="{first}.old@example.net",
        ),
    ],
    "indirect": [
        _t(
            "My doctor says I have {condition}, so sugar is out.",
            [("condition", [["{condition}"]])],
        ),
        _t("Everyone at work calls me {nick}.", [("nickname", [["{nick}"]])]),
        _t(
            "My wife keeps reminding me I'm allergic to {allergen2}.",
            [("allergy2", [["{allergen2}"], ["allerg*"]])],
        ),
        _t(
            "The account is under my husband's name, {spouse} {last}.",
            [("holder", [["{spouse} {last}"]])],
        ),
        _t("{boss} is my manager and she wants copies of everything.", [("boss", [["{boss}"]])]),
        _t("My mom always tells people I'm a {job}, which is true.", [("job", [["{job}"]])]),
        _t("My friends know I hate {food}.", [("food", [["{food}"], NEG])]),
    ],
}

DISTRACTORS: list[str] = [
    "A friend just got back from Accra and can't stop talking about it.",
    "My coworker Priyanka is moving to Ljubljana next year.",
    "We watched a documentary about Cusco last night.",
    "My neighbor's cat, Pickles, got stuck in a tree again.",
    "Someone named Harold called the office asking for Martina.",
    "My cousin's wedding in Tromso was in June.",
    "The new cafe on Elmwood Avenue is always packed.",
    "Our team lead, Gustavo, is out until Monday.",
    "I read that Winnipeg had a record cold snap.",
    "My friend Ayodele started a pottery class on Thursdays.",
]
