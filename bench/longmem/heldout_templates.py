"""The HELD-OUT set's planted facts and questions: written before any scoring run and
never tuned on. Same shape as ``dev_templates`` (see its docstring), other everything:
other slots and wording, questions that paraphrase rather than echo the statement,
lowercase names, codes, numbers in words, Spanish / French / German statements (some
asked in the same language, some asked in English), facts only a tool result states,
and dates said relatively ("yesterday", "last Tuesday", "three days ago").
"""

from __future__ import annotations

from typing import Any

DATE_STYLE = "relative"

USER_FACTS: list[dict[str, Any]] = [
    {
        "key": "cat_name",
        "topic": "pets",
        "values": ["noodle", "pickles", "miso", "tofu", "sardine"],
        "say": [
            "the cat, {v}, knocked a glass off the table again lol",
            "{v} (my cat) has decided 5am is breakfast time",
        ],
        "ask": ["what's my cat called?"],
    },
    {
        "key": "floor",
        "topic": "home",
        "values": ["fourteenth", "third", "twenty-second", "ninth"],
        "say": [
            "we're on the {v} floor and the elevator is out again",
            "carrying groceries up to the {v} floor is my workout these days",
        ],
        "ask": ["Which floor is my apartment on?"],
    },
    {
        "key": "kids",
        "topic": "money",
        "values": ["three", "two", "four"],
        "say": [
            "with {v} kids, school supplies add up fast",
            "we've got {v} children so the grocery bill is wild",
        ],
        "ask": ["How many children do I have?"],
    },
    {
        "key": "partner_name",
        "topic": "media",
        "values": ["jonas", "leilani", "okechukwu", "sven", "marisol"],
        "say": [
            "{v} and I can never agree on what to watch",
            "my partner {v} only likes documentaries",
        ],
        "ask": ["Who is my partner?"],
    },
    {
        "key": "badge",
        "topic": "work",
        "values": ["kx-4471", "b7q-0092", "zr-118", "tw-6605"],
        "say": [
            "my badge id is {v}, IT needs it for the laptop swap",
            "badge {v} stopped opening the side door, annoying",
        ],
        "ask": ["What is my employee badge number?"],
    },
    {
        "key": "ciudad_natal",
        "topic": "travel",
        "values": ["Sevilla", "Rosario", "Cuenca", "Arequipa"],
        "say": ["Nací en {v}, así que el calor no me molesta.", "Yo soy de {v}, de toda la vida."],
        "ask": ["¿De dónde soy?"],
    },
    {
        "key": "frere",
        "topic": "home",
        "values": ["Étienne", "Mathis", "Baptiste", "Loïc"],
        "say": ["Mon frère {v} vient dîner ce soir.", "Mon frère {v} m'a aidé à déménager."],
        "ask": ["What is my brother's name?"],
    },
    {
        "key": "pin_words",
        "topic": "fitness",
        "values": ["four seven one nine", "two two eight zero", "nine one five three"],
        "say": [
            "the pool door code is {v}, I keep forgetting it",
            "note to self: swim club door code {v}",
        ],
        "ask": ["What's the door code at the pool?"],
    },
]

PREFERENCES: list[dict[str, Any]] = [
    {
        "key": "coffee",
        "topic": "cooking",
        "values": ["oat milk flat white", "black americano", "cortado", "iced chai"],
        "say": ["my usual order is an {v}", "nothing beats a {v} honestly"],
        "ask": ["What do I usually order at the café?"],
    },
    {
        "key": "no_horror",
        "topic": "media",
        "values": ["horror", "musicals", "reality shows"],
        "say": ["please no {v}, I really can't stand them", "I don't do {v}, at all"],
        "ask": ["Is there anything I refuse to watch?"],
    },
    {
        "key": "abneigung",
        "topic": "cooking",
        "values": ["Rosenkohl", "Koriander", "Leber"],
        "say": ["Ich hasse {v}, bitte nie vorschlagen.", "{v} esse ich überhaupt nicht."],
        "ask": ["Was esse ich nicht gern?"],
    },
    {
        "key": "travel_mode",
        "topic": "travel",
        "values": ["night trains", "ferries", "long bus rides"],
        "say": ["I'd take {v} over planes any day", "{v} are my favorite way to get around"],
        "ask": ["How do I like to travel?"],
    },
    {
        "key": "intolerance",
        "topic": "cooking",
        "values": ["lactose", "fructose", "histamine"],
        "say": ["{v} wrecks my stomach so I avoid it", "dairy-ish stuff is out, {v} issue"],
        "ask": ["Which food intolerance do I have?"],
    },
]

ASSISTANT_FACTS: list[dict[str, Any]] = [
    {
        "key": "podcast",
        "topic": "media",
        "values": ["Hardcore History", "99% Invisible", "Radiolab", "Reply All"],
        "user": ["got a long commute now, anything worth listening to?"],
        "say": ["You might enjoy {v}; episodes are long enough for a commute."],
        "ask": ["What did you tell me to listen to on my commute?"],
    },
    {
        "key": "budget_rule",
        "topic": "money",
        "values": ["50/30/20 rule", "envelope method", "pay-yourself-first rule"],
        "user": ["i keep overspending, is there a simple system?"],
        "say": ["The {v} is simple and works for most people."],
        "ask": ["Which budgeting system did you suggest?"],
    },
    {
        "key": "receta",
        "topic": "cooking",
        "values": ["gazpacho", "tortilla de patatas", "pisto manchego"],
        "user": ["¿Qué puedo cocinar esta noche con pocas cosas?"],
        "say": ["Te recomiendo {v}: es fácil y barato."],
        "ask": ["¿Qué receta me recomendaste?"],
    },
]

TOOL_FACTS: list[dict[str, Any]] = [
    {
        "key": "flight_gate",
        "topic": "travel",
        "values": ["B22", "C7", "A14", "D31"],
        "user": ["can you check my flight status for tomorrow morning?"],
        "tool": "flight_status",
        "args": {"flight": "tomorrow"},
        "result": '{{"status": "on time", "gate": "{v}", "boarding": "07:40", "fare": "$318.20"}}',
        "reply": ["Your flight is on time tomorrow morning."],
        "ask": ["Which gate does my flight leave from?"],
    },
    {
        "key": "parcel",
        "topic": "home",
        "values": ["pickup locker 12 at the pharmacy", "the front desk", "the blue kiosk on 5th"],
        "user": ["where's that package I ordered?"],
        "tool": "track_parcel",
        "args": {"order": "latest"},
        "result": '{{"state": "delivered", "left_at": "{v}", "weight_kg": 2.4}}',
        "reply": ["It was delivered earlier today."],
        "ask": ["Where was my package left?"],
    },
]

UPDATES: list[dict[str, Any]] = [
    {
        "key": "phone",
        "topic": "work",
        "values": ["312-555-0199", "720-555-0142", "415-555-0187", "646-555-0123"],
        "say": ["if IT calls, my number is {v}", "work can reach me on {v}"],
        "update": ["new phone number btw: {v}", "got a new number, {v}, the old one's dead"],
        "ask": ["What's my phone number?"],
    },
    {
        "key": "diet_change",
        "topic": "cooking",
        "values": ["keto", "vegan", "pescatarian", "low-FODMAP"],
        "say": ["I've been doing {v} for a while", "still sticking with {v} eating"],
        "update": ["dropped {old}, I'm doing {v} now", "switched to {v}, {old} wasn't for me"],
        "ask": ["What diet am I on these days?"],
    },
    {
        "key": "quartier",
        "topic": "home",
        "values": ["Belleville", "Montmartre", "la Croix-Rousse", "Saint-Michel"],
        "say": ["J'habite à {v} depuis deux ans.", "Ici à {v}, les loyers montent."],
        "update": ["On a quitté {old}, on habite à {v} maintenant.", "Nouveau quartier: {v}!"],
        "ask": ["Which neighborhood do I live in now?"],
    },
]

EVENTS: list[dict[str, Any]] = [
    {
        "key": "passport",
        "topic": "travel",
        "say": ["renewed my passport {when}, finally", "passport renewal done {when}"],
        "ask": ["When did I renew my passport?"],
    },
    {
        "key": "fell_bike",
        "topic": "fitness",
        "say": ["fell off my bike {when}, just bruises", "had a small bike crash {when}"],
        "ask": ["When did I have the bike accident?"],
    },
    {
        "key": "interview",
        "topic": "work",
        "say": ["had the final interview {when}, fingers crossed", "final round was {when}"],
        "ask": ["When was my final job interview?"],
    },
    {
        "key": "boiler",
        "topic": "home",
        "say": ["the boiler broke down {when}, cold showers", "our boiler died {when}"],
        "ask": ["When did the boiler break?"],
    },
]

AGGREGATES: list[dict[str, Any]] = [
    {
        "key": "courses",
        "topic": "work",
        "values": ["SQL", "public speaking", "Spanish", "first aid", "Excel", "negotiation"],
        "say": ["signed up for a {v} course, work pays for it", "started a {v} class this week"],
        "ask": ["What courses have I taken?"],
        "n": 3,
    },
    {
        "key": "repairs",
        "topic": "home",
        "values": ["dishwasher", "garage door", "bathroom fan", "window latch", "doorbell"],
        "say": ["had to get the {v} fixed, another bill", "the {v} got repaired today"],
        "ask": ["What has been repaired at my place?"],
        "n": 3,
    },
]

ABSTAIN: list[dict[str, Any]] = [
    {"topic": "pets", "ask": ["what's my dog called?"]},
    {"topic": "travel", "ask": ["What was the seat number on my flight?"]},
    {"topic": "money", "ask": ["How much did I pay for the boiler repair?"]},
    {"topic": "home", "ask": ["What is my sister's name?"]},
    {"topic": "work", "ask": ["When did I start my current job?"]},
    {"topic": "media", "ask": ["Which movie did you recommend to me?"]},
]
