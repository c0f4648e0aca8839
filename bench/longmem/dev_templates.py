"""The DEVELOPMENT set's planted facts and questions: what recall is tuned and checked on.

Shape (shared with ``heldout_templates``; ``generate.py`` reads both the same way):

- ``USER_FACTS`` / ``PREFERENCES``: the user states ``say`` (``{v}``: the value) as the
  aside of a user turn of ``topic``; asked with ``ask``; the answer is the value.
- ``ASSISTANT_FACTS``: the user asks ``user``, the assistant answers ``say`` (with ``{v}``).
- ``TOOL_FACTS``: the user asks ``user``, the assistant calls ``tool`` and only the tool's
  ``result`` states the value.
- ``UPDATES``: ``say`` early, ``update`` (``{v}`` the new value, ``{old}`` the old one)
  in a later session; the answer is the new value, the first statement is superseded.
- ``EVENTS``: ``say`` with ``{when}``, written as ``DATE_STYLE`` says (``absolute``: "on
  March 13"; ``relative``: "yesterday", "last Tuesday"...); the answer is ``{when}`` as
  written, and the question's record also keeps the resolved date.
- ``AGGREGATES``: ``n`` statements in ``n`` sessions; the answer is all the values.
- ``ABSTAIN``: questions about things never said (near misses of the planted ones).
"""

from __future__ import annotations

from typing import Any

DATE_STYLE = "absolute"

USER_FACTS: list[dict[str, Any]] = [
    {
        "key": "dog_name",
        "topic": "pets",
        "values": ["Biscuit", "Pepper", "Mango", "Rocket", "Juniper", "Waffles"],
        "say": ["My dog {v} has been restless lately.", "I adopted a dog, {v}, last spring."],
        "ask": ["What is my dog's name?"],
    },
    {
        "key": "job",
        "topic": "work",
        "values": [
            "data analyst",
            "pediatric nurse",
            "civil engineer",
            "high school teacher",
            "UX designer",
            "pharmacist",
        ],
        "say": [
            "I work as a {v}, so my days are pretty packed.",
            "As a {v}, I'm on my feet a lot.",
        ],
        "ask": ["What do I do for a living?"],
    },
    {
        "key": "hometown",
        "topic": "travel",
        "values": ["Porto", "Milwaukee", "Adelaide", "Gdansk", "Valparaiso", "Leeds"],
        "say": ["I grew up in {v}, so I know long winters.", "Back home in {v} we never flew."],
        "ask": ["Where did I grow up?"],
    },
    {
        "key": "sister_name",
        "topic": "home",
        "values": ["Anika", "Rosalind", "Maren", "Teodora", "Ines", "Priya"],
        "say": ["My sister {v} is staying with us this week.", "My sister {v} helped me move."],
        "ask": ["What is my sister's name?"],
    },
    {
        "key": "car",
        "topic": "travel",
        "values": ["Subaru Outback", "Honda Civic", "Kia Niro", "Volvo V60", "Mazda 3"],
        "say": ["I drive a {v}, so road trips are easy.", "My {v} needs new tires soon."],
        "ask": ["What car do I drive?"],
    },
    {
        "key": "instrument",
        "topic": "media",
        "values": ["cello", "ukulele", "trumpet", "bass guitar", "piano"],
        "say": ["I've been learning the {v} in the evenings.", "I practice {v} most nights."],
        "ask": ["Which instrument am I learning?"],
    },
    {
        "key": "gym_locker",
        "topic": "fitness",
        "values": ["214", "57", "388", "902", "131"],
        "say": ["I always use locker {v} at the gym.", "My gym locker is number {v}."],
        "ask": ["What is my locker number at the gym?"],
    },
    {
        "key": "savings_goal",
        "topic": "money",
        "values": ["$4,000", "$12,500", "$900", "$7,200", "$25,000"],
        "say": ["I'm trying to save {v} by the end of the year.", "My savings goal is {v}."],
        "ask": ["How much am I trying to save?"],
    },
]

PREFERENCES: list[dict[str, Any]] = [
    {
        "key": "diet",
        "topic": "cooking",
        "values": ["vegetarian", "pescatarian", "vegan", "gluten-free"],
        "say": ["I'm {v}, so keep that in mind.", "Just so you know, I eat {v}."],
        "ask": ["What kind of diet do I follow?"],
    },
    {
        "key": "seat",
        "topic": "travel",
        "values": ["window seat", "aisle seat", "exit row"],
        "say": ["I always book a {v} when I fly.", "I prefer the {v} on planes."],
        "ask": ["Which seat do I prefer on flights?"],
    },
    {
        "key": "genre",
        "topic": "media",
        "values": ["historical fiction", "space opera", "cozy mysteries", "true crime"],
        "say": ["I love {v}, honestly.", "{v} is my favorite kind of book."],
        "ask": ["What genre of books do I like?"],
    },
    {
        "key": "workout_time",
        "topic": "fitness",
        "values": ["early morning", "lunch break", "late evening"],
        "say": ["I like to work out in the {v}.", "I prefer training during my {v}."],
        "ask": ["When do I prefer to work out?"],
    },
    {
        "key": "allergy",
        "topic": "cooking",
        "values": ["peanuts", "shellfish", "sesame", "kiwi"],
        "say": ["I'm allergic to {v}, by the way.", "Careful, I have a {v} allergy."],
        "ask": ["What am I allergic to?"],
    },
]

ASSISTANT_FACTS: list[dict[str, Any]] = [
    {
        "key": "book_rec",
        "topic": "media",
        "values": ["The Overstory", "Piranesi", "A Gentleman in Moscow", "Station Eleven"],
        "user": ["Can you recommend one novel I could start this week?"],
        "say": ["I'd go with {v}: it's absorbing without being heavy."],
        "ask": ["Which novel did you recommend to me?"],
    },
    {
        "key": "stretch",
        "topic": "fitness",
        "values": ["pigeon pose", "couch stretch", "cat-cow", "hamstring floss"],
        "user": ["What's one stretch I should do after sitting all day?"],
        "say": ["Try the {v}: two minutes a side loosens the hips a lot."],
        "ask": ["What stretch did you suggest for after sitting all day?"],
    },
    {
        "key": "paint",
        "topic": "home",
        "values": ["sage green", "warm white", "dusty blue", "terracotta"],
        "user": ["What color should I paint the bedroom?"],
        "say": ["A {v} would be calm and works with wood furniture."],
        "ask": ["What paint color did you suggest for my bedroom?"],
    },
]

TOOL_FACTS: list[dict[str, Any]] = [
    {
        "key": "hotel_code",
        "topic": "travel",
        "values": ["HX4821", "QK7730", "RB1195", "ZT5062"],
        "user": ["Can you book the hotel we talked about for the conference?"],
        "tool": "book_hotel",
        "args": {"nights": 3},
        "result": '{{"status": "confirmed", "confirmation": "{v}", "total": "$612.40"}}',
        "reply": ["Done, the hotel is booked for three nights."],
        "ask": ["What was the confirmation code for my hotel booking?"],
    },
    {
        "key": "vet_appt",
        "topic": "pets",
        "values": ["Dr. Halvorsen", "Dr. Okafor", "Dr. Brennan", "Dr. Salgado"],
        "user": ["Please set up a checkup at the vet for next week."],
        "tool": "schedule_appointment",
        "args": {"kind": "vet checkup"},
        "result": '{{"scheduled": true, "with": "{v}", "fee": "$85.00"}}',
        "reply": ["The checkup is scheduled for next week."],
        "ask": ["Which vet is my pet's checkup with?"],
    },
]

UPDATES: list[dict[str, Any]] = [
    {
        "key": "gym",
        "topic": "fitness",
        "values": ["FitLab", "Iron Temple", "PulseHaus", "Summit Climbing", "BlueWave Pool"],
        "say": ["I go to {v} three times a week.", "My gym is {v}, near the station."],
        "update": [
            "I switched from {old} to {v} this month.",
            "I cancelled {old}; I go to {v} now.",
        ],
        "ask": ["Which gym do I go to now?"],
    },
    {
        "key": "city",
        "topic": "home",
        "values": ["Austin", "Rotterdam", "Montreal", "Brisbane", "Lyon"],
        "say": ["Living in {v} has its perks.", "Here in {v} rent is climbing."],
        "update": ["We just moved from {old} to {v}!", "We left {old}; we live in {v} now."],
        "ask": ["Which city do I live in now?"],
    },
    {
        "key": "employer",
        "topic": "work",
        "values": ["Northwind", "Globex", "Initech", "Vandelay Imports", "Hooli"],
        "say": ["At {v} we have a lot of meetings.", "My company, {v}, is growing fast."],
        "update": ["I left {old} and started at {v} on Monday.", "New job: I'm at {v} now."],
        "ask": ["Which company do I work for now?"],
    },
]

EVENTS: list[dict[str, Any]] = [
    {
        "key": "half_marathon",
        "topic": "fitness",
        "say": [
            "I ran the city half marathon {when}!",
            "I finished my first half marathon {when}.",
        ],
        "ask": ["When did I run the half marathon?"],
    },
    {
        "key": "flu_shot",
        "topic": "pets",
        "say": ["I got my flu shot {when}, arm still hurts.", "Got the flu shot {when}."],
        "ask": ["When did I get my flu shot?"],
    },
    {
        "key": "concert",
        "topic": "media",
        "say": ["I saw a great jazz concert {when}.", "We went to a jazz concert {when}."],
        "ask": ["When did I go to the jazz concert?"],
    },
    {
        "key": "dentist",
        "topic": "money",
        "say": ["I paid the dentist bill {when}.", "The dentist visit {when} was pricey."],
        "ask": ["When did I go to the dentist?"],
    },
]

AGGREGATES: list[dict[str, Any]] = [
    {
        "key": "plants",
        "topic": "home",
        "values": ["fern", "cactus", "monstera", "fiddle leaf fig", "peace lily", "orchid"],
        "say": ["I bought a {v} for the balcony today.", "I picked up a {v} for the balcony."],
        "ask": ["Which plants have I bought for the balcony?"],
        "n": 3,
    },
    {
        "key": "cities_visited",
        "topic": "travel",
        "values": ["Vienna", "Kyoto", "Marrakesh", "Reykjavik", "Cusco", "Tallinn"],
        "say": ["I just got back from a trip to {v}.", "My trip to {v} was wonderful."],
        "ask": ["Which cities have I traveled to?"],
        "n": 3,
    },
]

ABSTAIN: list[dict[str, Any]] = [
    {"topic": "pets", "ask": ["What is my cat's name?"]},
    {"topic": "home", "ask": ["What is my brother's name?"]},
    {"topic": "travel", "ask": ["What was the confirmation code for my rental car?"]},
    {"topic": "fitness", "ask": ["When did I run the full marathon?"]},
    {"topic": "media", "ask": ["Which podcast did you recommend to me?"]},
    {"topic": "work", "ask": ["What is my manager's name?"]},
]
