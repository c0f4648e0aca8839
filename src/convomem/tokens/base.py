"""The tokenizer protocol, and ``BaseTokenizer``: each distinct message content counted once.

Every built-in tokenizer derives from ``BaseTokenizer``, which guarantees that a
message is tokenized at most once per tokenizer: a given ``Message.tokens`` is
trusted, a count is memoized on the message, and a bounded cache keyed by the
message's exact content (role, name, blocks) serves callers that rebuild ``Message``
objects from the same dicts every turn. Two messages share a cached count only when
that key is equal, i.e. when they would tokenize identically.

``checked_count`` and ``checked_count_many`` are the one validation of what *any*
tokenizer returns (a custom one included): every caller that turns a count into budget
arithmetic goes through them, so a bad count is rejected the same way everywhere.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from .._check import non_negative_int
from ..errors import TokenizerError
from ..model import Message, ToolResultBlock
from ..model.messages import counts_memo, set_counts_memo

PER_MESSAGE_TOKENS: Final = 4
"""Overhead per message (role and separators), as chat providers bill it."""

IMAGE_TOKENS: Final = 85
"""Tokens charged per image block (a low-detail image at OpenAI)."""

FLAT_BLOCK_TOKENS: Final = IMAGE_TOKENS
"""Tokens charged per block with no text to count (opaque audio, a file, redacted
thinking: ``OpaqueBlock.flat_cost``), an estimate like an image's."""

_uids = itertools.count(1)


@runtime_checkable
class Tokenizer(Protocol):
    """What convomem needs from a token counter."""

    name: str

    def count(self, text: str) -> int:
        """Tokens in a piece of text."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens a message costs, overhead included."""
        ...

    def count_messages(self, messages: Iterable[Message]) -> int:
        """The sum of ``count_message`` over ``messages``."""
        ...


def scrub(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (valid pairs are joined).

    What tiktoken does before retrying such a text; backends that cannot take a lone
    surrogate (a Rust tokenizer, most ``text -> int`` functions) count this instead.
    """
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bad_count(tokenizer: object, message: Message | None, value: object) -> TokenizerError:
    name = getattr(tokenizer, "name", type(tokenizer).__name__)
    where = "a text" if message is None else f"message id={message.id!r}"
    return TokenizerError(
        f"tokenizer {name!r} counted {_short(value)} tokens for {where}; "
        "a count must be a non-negative integer"
    )


def _valid(tokenizer: object, message: Message | None, value: object) -> int:
    """``value`` as a plain int if it is a non-negative integer, else ``TokenizerError``.

    Accepts int subclasses and integer types with ``__index__`` (numpy's), never a
    bool, a float, a string or None.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 0:
            return int(value)
    elif not isinstance(value, bool) and hasattr(value, "__index__"):
        try:
            n = operator.index(value)
        except TypeError:
            pass
        else:
            if n >= 0:
                return n
    raise _bad_count(tokenizer, message, value)


def checked_count(tokenizer: Tokenizer, message: Message) -> int:
    """``tokenizer.count_message(message)``, validated: a non-negative plain int.

    Raises ``TokenizerError`` naming the tokenizer, the message id and the value when a
    (custom) tokenizer returns something else: negative, a float, a bool, None, a string.
    """
    n = tokenizer.count_message(message)
    if n.__class__ is int and n >= 0:
        return n
    return _valid(tokenizer, message, n)


def checked_count_many(tokenizer: Tokenizer, messages: Iterable[Message]) -> list[int]:
    """The validated count of each message, in order, batched where the tokenizer can.

    A ``BaseTokenizer`` counts with ``count_many`` (one batch of the distinct uncached
    contents); another tokenizer with a ``count_many`` method is called once and its
    answer checked; any other is mapped with ``checked_count``.
    """
    msgs = messages if isinstance(messages, list) else list(messages)
    if isinstance(tokenizer, BaseTokenizer):
        return tokenizer.count_many(msgs)
    many = getattr(tokenizer, "count_many", None)
    if many is None:
        return [checked_count(tokenizer, m) for m in msgs]
    counts = many(msgs)
    if not isinstance(counts, Sequence) or len(counts) != len(msgs):
        name = getattr(tokenizer, "name", type(tokenizer).__name__)
        raise TokenizerError(
            f"tokenizer {name!r}: count_many returned {type(counts).__name__} "
            f"{_short(counts)} for {len(msgs)} messages; need one count per message"
        )
    return [
        n if n.__class__ is int and n >= 0 else _valid(tokenizer, m, n)
        for m, n in zip(msgs, counts, strict=True)
    ]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _wire_messages(message: Message) -> int:
    """How many provider messages ``message`` may become: OpenAI sends each tool result
    as a message of its own, and what else the message holds as one more. Each pays the
    per-message overhead, so a count never falls short of the request (an upper bound
    where a provider packs them into one message)."""
    content = message.content
    if type(content) is str:
        return 1
    results = sum(1 for b in content if isinstance(b, ToolResultBlock))
    if not results:
        return 1
    return results + (1 if len(content) > results else 0)


class BaseTokenizer:
    """A tokenizer that counts each distinct message content at most once.

    A message costs ``count(countable_text)`` plus ``per_message`` (once per provider
    message it may become: each tool result is one for OpenAI), plus
    ``image_tokens`` per image and ``flat_block_tokens`` per block with no text to count.
    Subclasses implement ``count(text)``, and may override ``count_texts`` to count a
    batch faster than one text at a time. ``tokenizations`` counts the distinct message
    contents this tokenizer actually tokenized (cache misses), a deterministic measure
    of work.
    """

    name: str = "base"
    per_message: int = PER_MESSAGE_TOKENS
    image_tokens: int = IMAGE_TOKENS
    flat_block_tokens: int = FLAT_BLOCK_TOKENS

    def __init__(self, *, cache_size: int = 1_000_000) -> None:
        non_negative_int("cache_size", cache_size)
        self._uid = next(_uids)
        self._cache: dict[tuple[Any, ...], int] = {}
        self._cache_size = cache_size
        self.tokenizations = 0

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no per-message overhead)."""
        raise NotImplementedError

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, in order; override to batch (threads, a native batch call)."""
        count = self.count
        return [count(t) for t in texts]

    # -- what a message costs ------------------------------------------------------------

    def _prepare(self, message: Message) -> tuple[str, int]:
        """The text to tokenize and the fixed tokens added to its count.

        The text is ``Message.countable_text()`` (opaque blocks' text included); the
        fixed part is the per-message overhead plus a flat estimate per image and per
        block with no text (``Message.flat_cost_blocks()``).
        """
        try:
            text = message.countable_text()
        except RecursionError:
            raise _too_deep(message) from None
        extra = self.per_message * _wire_messages(message)
        images = message.image_count()
        if images:
            extra += self.image_tokens * images
        flat = message.flat_cost_blocks()
        if flat:
            extra += self.flat_block_tokens * flat
        return text, extra

    def _tokenize(self, message: Message) -> int:
        """Count one message that no cache holds, validated."""
        text, extra = self._prepare(message)
        try:
            try:
                n = self.count(text)
            except UnicodeError:  # a lone surrogate the backend cannot encode
                n = self.count(scrub(text))
        except TokenizerError as exc:
            raise TokenizerError(f"message id={message.id!r}: {exc}") from exc
        if n.__class__ is not int or n < 0:
            n = _valid(self, message, n)
        return n + extra

    def _tokenize_batch(self, messages: list[Message]) -> list[int]:
        """Count messages no cache holds, as one ``count_texts`` batch when it is overridden."""
        if type(self).count_texts is BaseTokenizer.count_texts:
            tokenize = self._tokenize
            return [tokenize(m) for m in messages]
        prepared = [self._prepare(m) for m in messages]
        counts = self.count_texts([text for text, _ in prepared])
        if not isinstance(counts, Sequence) or len(counts) != len(messages):
            raise TokenizerError(
                f"tokenizer {self.name!r}: count_texts returned {_short(counts)} "
                f"for {len(messages)} texts; need one count per text"
            )
        out = []
        for m, (_, extra), n in zip(messages, prepared, counts, strict=True):
            if n.__class__ is not int or n < 0:
                n = _valid(self, m, n)
            out.append(n + extra)
        return out

    def _key(self, message: Message) -> tuple[Any, ...]:
        try:
            return message.content_key
        except RecursionError:
            raise _too_deep(message) from None

    def _store(self, key: tuple[Any, ...], n: int) -> None:
        cache = self._cache
        if self._cache_size:
            if len(cache) >= self._cache_size:
                # Evict the oldest entry; another thread may have evicted it already.
                cache.pop(next(iter(cache), None), None)  # type: ignore[arg-type]
            cache[key] = n

    def count_message(self, message: Message) -> int:
        """Tokens ``message`` costs, overhead included; tokenized at most once."""
        if message.tokens is not None:
            return message.tokens
        memo = counts_memo(message)
        if memo is not None:
            hit = memo.get(self._uid)
            if hit is not None:
                return hit
        else:
            memo = {}
            set_counts_memo(message, memo)
        key = self._key(message)
        n = self._cache.get(key)
        if n is None:
            n = self._tokenize(message)
            self.tokenizations += 1
            self._store(key, n)
        memo[self._uid] = n
        return n

    def count_many(self, messages: Iterable[Message]) -> list[int]:
        """``[count_message(m) for m in messages]``, with the misses tokenized in one batch.

        Given counts, per-message memos and the content cache are served first; each
        distinct uncached content is tokenized once, all of them in one ``count_texts``
        call (threads for tiktoken, a native batch for Hugging Face). This is the cold
        path: counting a long conversation the first time.
        """
        msgs = messages if isinstance(messages, list) else list(messages)
        if type(self).count_message is not BaseTokenizer.count_message:
            return [checked_count(self, m) for m in msgs]
        uid = self._uid
        cache = self._cache
        out: list[int] = []
        append = out.append
        pending: dict[tuple[Any, ...], int] = {}  # content key -> index in ``reps``
        reps: list[Message] = []
        misses: list[int] = []  # positions in ``out`` holding an index in ``reps`` for now
        i = -1
        try:
            for m in msgs:
                i += 1
                t = m.tokens
                if t is not None:
                    append(t)
                    continue
                memo = counts_memo(m)
                if memo is not None:
                    hit = memo.get(uid)
                    if hit is not None:
                        append(hit)
                        continue
                key = m.content_key
                n = cache.get(key)
                if n is not None:
                    if memo is None:
                        set_counts_memo(m, {uid: n})
                    else:
                        memo[uid] = n
                    append(n)
                    continue
                r = pending.get(key)
                if r is None:
                    r = pending[key] = len(reps)
                    reps.append(m)
                append(r)
                misses.append(i)
        except RecursionError:
            raise _too_deep(msgs[i]) from None
        if not reps:
            return out
        counts = self._tokenize_batch(reps)
        self.tokenizations += len(reps)
        for key, n in zip(pending, counts, strict=True):
            self._store(key, n)
        for i in misses:
            n = out[i] = counts[out[i]]
            m = msgs[i]
            memo = counts_memo(m)
            if memo is None:
                set_counts_memo(m, {uid: n})
            else:
                memo[uid] = n
        return out

    def count_messages(self, messages: Iterable[Message]) -> int:
        """The total cost of ``messages``."""
        count = self.count_message
        return sum(count(m) for m in messages)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _too_deep(message: Message) -> TokenizerError:
    return TokenizerError(
        f"message id={message.id!r}: content is nested too deeply to count "
        "(a tool input or result nested thousands of levels)"
    )
