"""The recall analyzer: the Snowball English stemmer against the reference
implementation's output (a table made with NLTK's ``SnowballStemmer("english")`` from
generic English words, and the algorithm's own edge cases), stop words, folding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from convomem.recall.analyze import STOP_WORDS, query_terms, stem, terms

REFERENCE = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "tie",
    "caress": "caress",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "failing": "fail",
    "filing": "file",
    "happy": "happi",
    "sky": "sky",
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "valency": "valenc",
    "hesitancy": "hesit",
    "digitizer": "digit",
    "conformably": "conform",
    "radically": "radic",
    "differently": "differ",
    "vilely": "vile",
    "analogously": "analog",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "feudalism": "feudal",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "callousness": "callous",
    "formality": "formal",
    "sensitivity": "sensit",
    "sensibility": "sensibl",
    "triplicate": "triplic",
    "formative": "format",
    "formalize": "formal",
    "electricity": "electr",
    "electrical": "electr",
    "hopeful": "hope",
    "goodness": "good",
    "revival": "reviv",
    "allowance": "allow",
    "inference": "infer",
    "airliner": "airlin",
    "gyroscopic": "gyroscop",
    "adjustable": "adjust",
    "defensible": "defens",
    "irritant": "irrit",
    "replacement": "replac",
    "adjustment": "adjust",
    "dependent": "depend",
    "adoption": "adopt",
    "activate": "activ",
    "angularity": "angular",
    "homologous": "homolog",
    "effective": "effect",
    "bowdlerize": "bowdler",
    "probate": "probat",
    "rate": "rate",
    "cease": "ceas",
    "controlling": "control",
    "rolling": "roll",
    "generously": "generous",
    "generate": "generat",
    "communication": "communic",
    "arsenal": "arsenal",
    "dying": "die",
    "lying": "lie",
    "news": "news",
    "skis": "ski",
    "skies": "sky",
    "idly": "idl",
    "gently": "gentl",
    "early": "earli",
    "only": "onli",
    "singly": "singl",
    "inning": "inning",
    "outing": "outing",
    "canning": "canning",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
    "painting": "paint",
    "painted": "paint",
    "paints": "paint",
    "running": "run",
    "runs": "run",
    "happily": "happili",
    "happiness": "happi",
    "friendships": "friendship",
    "sunrise": "sunris",
    "kids": "kid",
    "swimming": "swim",
    "camping": "camp",
    "campers": "camper",
    "adoptions": "adopt",
    "counseling": "counsel",
    "mentally": "mental",
    "volunteering": "volunt",
    "turtles": "turtl",
    "recipes": "recip",
    "baked": "bake",
}


def test_stems_are_the_reference_stemmers() -> None:
    assert {w: stem(w) for w in REFERENCE} == REFERENCE


def test_terms_fold_drop_stop_words_and_stem() -> None:
    assert terms("What did Caroline PAINT? She painted sunrises at the Café.") == [
        "carolin",
        "paint",
        "paint",
        "sunris",
        "cafe",
    ]
    assert terms("I'm so sure") == ["sure"]


def test_a_query_of_stop_words_only_keeps_them() -> None:
    assert query_terms("what did you do?") == ["what", "did", "you", "do"]
    assert query_terms("the paintings, the painting") == ["paint"]


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14))
def test_a_stem_is_short_lowercase_and_idempotent_on_short_words(word: str) -> None:
    s = stem(word)
    assert s and s == s.lower() and len(s) <= len(word) + 1  # "e" restored at most
    if len(word) <= 2:
        assert s == word


def test_stop_words_are_lowercase_function_words() -> None:
    assert {"the", "what", "did", "you"} <= STOP_WORDS
    assert all(w == w.lower() for w in STOP_WORDS)
    assert not {"paint", "may", "adoption", "caroline"} & STOP_WORDS
