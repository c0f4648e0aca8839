"""The event-stream parser against a brute-force oracle: any split of a stream into
chunks (a ``\\r\\n`` cut in two included) gives the events of the whole stream."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem._sse import Event, EventParser, encode_event

EXAMPLES = int(os.environ.get("CONVOMEM_SSE_EXAMPLES", "150"))


def oracle(stream: str) -> list[Event]:
    """Split the whole stream into lines first, then apply the field rules."""
    events: list[Event] = []
    name, data, ident = "", [], None
    lines = stream.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines[:-1]:  # the last piece is unterminated
        if line == "":
            if data:
                events.append(Event(name or "message", "\n".join(data), ident))
            name, data = "", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
            elif field == "id":
                ident = value
    return events


line = st.one_of(
    st.builds(lambda v: f"data: {v}", st.text(alphabet='ab :{}"', max_size=6)),
    st.builds(lambda v: f"data:{v}", st.text(alphabet="xy ", max_size=3)),
    st.sampled_from(["event: delta", "event: done", ": comment", "id: 7", "retry: 5", "data"]),
    st.just(""),
)
newline = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[int]]:
    parts = draw(st.lists(st.tuples(line, newline), max_size=25))
    stream = "".join(a + b for a, b in parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    return stream, cuts


@settings(max_examples=EXAMPLES)
@given(streams())
def test_any_chunking_gives_the_events_of_the_whole(case: tuple[str, list[int]]) -> None:
    stream, cuts = case
    parser = EventParser()
    got: list[Event] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got.extend(parser.feed(stream[a:b]))
    assert got == oracle(stream)


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    parser = EventParser()
    assert parser.feed("data: a\r") == []
    assert parser.feed("\n\r\n") == [Event("message", "a")]


def test_an_empty_chunk_between_cr_and_lf_changes_nothing() -> None:
    parser = EventParser()
    assert parser.feed("data: \r") + parser.feed("") + parser.feed("\n") == []


def test_encode_then_parse_round_trips_json_with_newlines() -> None:
    data = {"content": "two\nlines", "n": 3, "é": "ü"}
    (event,) = EventParser().feed(encode_event("delta", data))
    assert event.event == "delta" and event.json() == data


def test_an_unterminated_last_event_is_discarded() -> None:
    parser = EventParser()
    assert parser.feed("event: delta\ndata: x\n") == []
    assert parser.close() == []
    assert parser.feed("data: y\n\n") == [Event("message", "y")]
