"""The conversational scaffolding every turn is built from, planted or not.

A user turn is ``opener + [aside] + request``: a planted turn puts the fact in the aside's
place, a filler turn a first-person aside about something nobody asks about (or nothing).
Both draw the opener, the request and the assistant's reply from the same topic pools,
so a planted turn does not stand out by its shape, its length or its words. Asides are
deliberately near the planted facts (other people's dogs, other cities, other dates) so
lexical overlap alone does not find the evidence. Tool calls (weather, prices, search)
appear in filler too, with numbers and amounts in their results.
"""

from __future__ import annotations

from typing import Any

TOPICS: dict[str, dict[str, list[str]]] = {
    "cooking": {
        "open": [
            "Quick question about dinner.",
            "I'm planning meals for the week.",
            "Kitchen question for you.",
            "So I was at the market this morning.",
            "Okay, food question.",
        ],
        "aside": [
            "My roommate keeps buying way too much pasta.",
            "My brother swears by cast iron pans.",
            "Our oven runs a bit hot, I think.",
            "A coworker brought homemade bread to the office yesterday.",
            "My neighbor grills something every single weekend.",
            "I finally cleaned out the fridge.",
        ],
        "ask": [
            "What could I cook tonight that takes under thirty minutes?",
            "Any ideas for a lunch I can prep on Sunday?",
            "How do I keep rice from getting mushy?",
            "What's a good side dish for roast chicken?",
            "Can you suggest a soup for a cold evening?",
            "How long do cooked lentils keep in the fridge?",
        ],
        "reply": [
            "A quick stir-fry works well: slice the vegetables thin, get the pan very hot "
            "and add the sauce at the end so it doesn't burn.",
            "Batch-cook a grain, roast a tray of vegetables and make one sauce; you can "
            "mix them differently each day so it doesn't get boring.",
            "Rinse the rice first, use a little less water than the package says and let it "
            "rest covered for ten minutes after cooking.",
            "Roasted carrots with a bit of honey, or a sharp green salad, both balance a "
            "rich main nicely.",
            "A tomato and white bean soup is easy and filling; finish it with olive oil "
            "and some grated cheese.",
            "About four to five days in a sealed container; freeze them in portions if you "
            "need longer.",
        ],
    },
    "travel": {
        "open": [
            "Travel question.",
            "I'm starting to plan a trip.",
            "Thinking about getting away for a few days.",
            "Okay, so about vacations.",
            "Need some help with travel stuff.",
        ],
        "aside": [
            "My cousin just got back from Lisbon and loved it.",
            "My parents always drive instead of flying.",
            "A friend of mine lost her luggage in Frankfurt last year.",
            "My manager is traveling to Tokyo next month.",
            "My old roommate lives near Seattle now.",
            "I still have some airline miles from two years ago.",
        ],
        "ask": [
            "What should I pack for a long weekend in the mountains?",
            "How early should I get to the airport for an international flight?",
            "Is it better to book hotels far in advance or last minute?",
            "What's a good way to deal with jet lag?",
            "Can you suggest a few things to do in a city on a rainy day?",
            "How do I find cheaper train tickets?",
        ],
        "reply": [
            "Layers are the key: a warm fleece, a rain shell, good walking shoes and a "
            "small first-aid kit cover most surprises.",
            "Around three hours for international flights is the usual advice, more at busy "
            "airports or during holidays.",
            "For popular dates, book early with free cancellation and keep checking; prices "
            "for quiet weeks often drop closer to the date.",
            "Shift your sleep an hour a day before leaving, get daylight when you arrive and "
            "avoid long naps on the first day.",
            "Museums, covered markets, a long lunch and a cinema make a good rainy-day "
            "plan almost anywhere.",
            "Book early, travel off-peak, and look at regional rail passes; splitting a "
            "journey into two tickets sometimes helps too.",
        ],
    },
    "fitness": {
        "open": [
            "Fitness question.",
            "Trying to get back into shape.",
            "So about my workouts.",
            "I've been thinking about exercise.",
            "Health and fitness stuff again.",
        ],
        "aside": [
            "My sister runs every morning before work.",
            "My knee was a bit sore after the last hike.",
            "A colleague just signed up for a triathlon.",
            "My friend keeps inviting me to his spin class.",
            "I bought new running shoes a while ago.",
            "My dad started doing yoga at seventy.",
        ],
        "ask": [
            "How many days a week should I do strength training?",
            "What's a good warm-up before running?",
            "How do I stay motivated when the weather is bad?",
            "Is it okay to work out when I'm a bit sore?",
            "What should I eat after a workout?",
            "How do I build up to running ten kilometers?",
        ],
        "reply": [
            "Two or three sessions a week with a rest day between them is plenty for most "
            "people starting out.",
            "Five minutes of easy jogging, then leg swings, lunges and a few short strides "
            "gets everything ready.",
            "Plan indoor options in advance, keep the sessions short, and track streaks; "
            "a workout partner helps a lot too.",
            "Light movement is usually fine and can even help; skip it if the pain is sharp "
            "or gets worse.",
            "Some protein and some carbohydrates within a couple of hours, like yogurt with "
            "fruit or eggs on toast.",
            "Increase your weekly distance by about ten percent and add one longer run each "
            "week; walk breaks are fine.",
        ],
    },
    "work": {
        "open": [
            "Work question.",
            "Long day at the office.",
            "Need some career advice.",
            "So, about my job.",
            "Okay, something from work.",
        ],
        "aside": [
            "My team lead is on parental leave this month.",
            "A coworker of mine just moved to the Denver office.",
            "Our company switched chat tools again.",
            "My friend got promoted last week.",
            "There's a reorganization rumor going around.",
            "My desk is right next to the printer.",
        ],
        "ask": [
            "How do I ask for feedback without it being awkward?",
            "What's a good way to prepare for a performance review?",
            "How can I run shorter meetings?",
            "Any tips for writing a clear status update?",
            "How do I say no to extra projects politely?",
            "What should I put in a one-page project proposal?",
        ],
        "reply": [
            "Ask about one specific piece of work and one thing to change; specific "
            "questions get specific answers.",
            "List what you delivered, what it changed and what you want next; bring two "
            "or three concrete examples.",
            "Send an agenda, set a clear outcome, and end early when it's reached; "
            "standing meetings help too.",
            "Lead with the decision or risk, then progress, then next steps; keep it short "
            "enough to read on a phone.",
            "Explain what you're working on and ask which priority should move if you take "
            "the new project on.",
            "The problem, the proposed change, the cost, the expected result and a timeline "
            "fit on one page.",
        ],
    },
    "home": {
        "open": [
            "House stuff.",
            "Question about the apartment.",
            "I'm trying to get the place organized.",
            "Home improvement question.",
            "So, domestic life.",
        ],
        "aside": [
            "My landlord finally fixed the heater.",
            "The neighbors upstairs are renovating.",
            "My mom gave us her old sofa.",
            "Our building has a new recycling system.",
            "A friend helped me hang shelves last weekend.",
            "The hallway light keeps flickering.",
        ],
        "ask": [
            "How do I get rid of condensation on the windows?",
            "What's the best way to organize a small closet?",
            "How often should I clean the washing machine?",
            "Any ideas for making a small living room feel bigger?",
            "What plants survive in a dark corner?",
            "How do I patch a small hole in drywall?",
        ],
        "reply": [
            "Ventilate for a few minutes twice a day, keep the heating steady and wipe the "
            "glass in the morning; a small dehumidifier helps in winter.",
            "Use matching hangers, add a second rod for short items and put seasonal things "
            "in boxes on the top shelf.",
            "Once a month: run an empty hot cycle with vinegar or a cleaner and wipe the "
            "door seal.",
            "Light colors, a large mirror, furniture on legs and fewer but bigger pieces "
            "make a room feel larger.",
            "Snake plants, pothos and ZZ plants tolerate low light and irregular watering.",
            "Spackle, let it dry, sand it smooth, prime and paint; a patch kit helps for "
            "anything larger than a nail hole.",
        ],
    },
    "pets": {
        "open": [
            "Pet question.",
            "Animal stuff again.",
            "So about pets.",
            "Random question about animals.",
            "I was at the vet's waiting room today.",
        ],
        "aside": [
            "My neighbor's dog barks all night.",
            "My cousin has two cats that hate each other.",
            "A friend is fostering a puppy this month.",
            "My niece wants a hamster for her birthday.",
            "There's a stray cat that visits our garden.",
            "My coworker brings her dog to the office.",
        ],
        "ask": [
            "How often should a dog see the vet?",
            "What's a good way to introduce a new pet to the house?",
            "How do I stop a pet from chewing furniture?",
            "Are there plants that are toxic to pets?",
            "How much exercise does a young dog need?",
            "What should go in a pet first-aid kit?",
        ],
        "reply": [
            "Once a year for healthy adults, twice for seniors, plus vaccinations on schedule.",
            "Give it one quiet room first, swap scents for a few days and keep early "
            "meetings short and supervised.",
            "Offer chew toys, make the furniture unattractive with a bitter spray and "
            "reward the right behavior.",
            "Lilies, sago palms and aloe are common ones to avoid; check any new plant "
            "before bringing it home.",
            "Roughly an hour a day split into walks and play, adjusted for breed and age.",
            "Gauze, tape, saline, tweezers, a digital thermometer and your vet's number.",
        ],
    },
    "media": {
        "open": [
            "Looking for something to read or watch.",
            "Entertainment question.",
            "I have a free evening coming up.",
            "Book and movie question.",
            "So I finished a series last night.",
        ],
        "aside": [
            "My book club is reading a thriller this month.",
            "A friend keeps telling me to watch a Korean drama.",
            "My partner fell asleep halfway through the last movie we picked.",
            "My brother only reads science fiction.",
            "I've got a long flight coming up at some point.",
            "The library near me reopened after renovations.",
        ],
        "ask": [
            "Can you recommend something light for a weekend?",
            "What's a good audiobook for a long drive?",
            "Any documentaries that are actually gripping?",
            "What should I read after a long fantasy series?",
            "How do I get back into reading regularly?",
            "Can you suggest a movie for a group with different tastes?",
        ],
        "reply": [
            "A short comic novel or a feel-good film works; something you can finish in one "
            "or two sittings.",
            "Narrative nonfiction reads well aloud; pick a narrator you enjoy, it matters "
            "more than the book.",
            "Nature and sports documentaries are often the most gripping; look for ones "
            "that follow one story.",
            "Something short and self-contained, like a novella or a short-story "
            "collection, resets the palate.",
            "Ten pages before bed, a book always in your bag, and permission to drop books "
            "you don't enjoy.",
            "An adventure comedy is a safe middle ground; let everyone veto one option.",
        ],
    },
    "money": {
        "open": [
            "Money question.",
            "Trying to get my finances in order.",
            "Budget stuff.",
            "So about saving money.",
            "Quick finance question.",
        ],
        "aside": [
            "My friend just bought her first apartment.",
            "My brother spends too much on takeout.",
            "Our rent is going up next year.",
            "A coworker recommended a budgeting app.",
            "My parents are thinking about retiring early.",
            "I got a small bonus at some point this year.",
        ],
        "ask": [
            "How much should I keep in an emergency fund?",
            "What's a simple way to track spending?",
            "Should I pay off debt or save first?",
            "How do I cut down on subscriptions?",
            "Is it worth negotiating my phone bill?",
            "How do I plan for a big purchase?",
        ],
        "reply": [
            "Three to six months of essential expenses is the usual target; start with one "
            "month and build from there.",
            "Put every expense in three categories for a month; the pattern is usually "
            "obvious after that.",
            "Keep a small buffer first, then pay down the highest-interest debt as fast as "
            "you can.",
            "List them all, cancel anything unused for a month and rotate streaming "
            "services instead of stacking them.",
            "Often yes: ask about current offers and mention what competitors charge.",
            "Set a target date, divide the price by the months left and automate the "
            "transfer on payday.",
        ],
    },
}

# The user's short follow-ups and the assistant's answers to them: the second half of an
# exchange, in every session, planted or not.
FOLLOW_UPS: list[str] = [
    "Thanks, that helps.",
    "Makes sense. Anything else I should know?",
    "Good point, I hadn't thought of that.",
    "Okay, I'll try that this week.",
    "Hmm, can you say a bit more?",
    "Great, thank you!",
    "Got it.",
    "Interesting, why is that?",
]
FOLLOW_REPLIES: list[str] = [
    "You're welcome, let me know how it goes.",
    "One more thing: start small and adjust as you go, it's easier to keep up.",
    "It's a common thing to miss; most people only notice it after the first try.",
    "Sounds good. If anything comes up, just ask.",
    "Sure: the main idea is to make the first step easy and repeatable.",
    "Happy to help!",
    "Anytime.",
    "Mostly habit: the routine that takes less effort wins over time.",
]

# Filler tool calls: an assistant message calling the tool, its result, a reply that
# reads it. Results carry numbers and amounts, like real tool output.
FILLER_TOOLS: list[dict[str, Any]] = [
    {
        "user": "What's the weather going to be like tomorrow?",
        "tool": "get_weather",
        "args": {"when": "tomorrow"},
        "result": '{{"forecast": "light rain", "high_c": {a}, "low_c": {b}, "wind_kmh": {c}}}',
        "reply": "Light rain tomorrow, so bring an umbrella; it stays mild.",
    },
    {
        "user": "How much is 250 euros in dollars right now?",
        "tool": "convert_currency",
        "args": {"amount": 250, "from": "EUR", "to": "USD"},
        "result": '{{"amount": "${a}.{c}", "rate": "1.0{b}", "fee": "$2.{c}"}}',
        "reply": "That converts at today's rate; the bank fee is small.",
    },
    {
        "user": "Can you look up the price of a basic blender?",
        "tool": "search_products",
        "args": {"query": "basic blender"},
        "result": '{{"results": [{{"name": "BlendPro 300", "price": "${a}.99"}}, '
        '{{"name": "Mixi Go", "price": "${b}.49"}}, {{"name": "KitchenBasic", '
        '"price": "${c}.00"}}]}}',
        "reply": "There are a few options; the mid-range one has the best reviews.",
    },
    {
        "user": "Could you check my calendar for Friday afternoon?",
        "tool": "calendar_lookup",
        "args": {"day": "friday"},
        "result": '{{"events": [{{"title": "Team sync", "start": "1{b}:00"}}, '
        '{{"title": "Dentist reminder", "start": "1{c}:30"}}], "free_minutes": {a}}}',
        "reply": "You have a couple of things on Friday afternoon but some free time too.",
    },
]
