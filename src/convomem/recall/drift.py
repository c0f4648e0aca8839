"""DriftDetector: has the conversation left its topic? (the seed's ContextDriftDetector)

Each new message is embedded once and compared (cosine) with two references: the
embedding of the *opening topic* (the first message with text, or ``set_initial_topic``)
and a *running centroid* of the recent messages (an exponential moving average, or the
mean of a window). A message far from both has changed the topic: start a new summary
segment. A message far from the recent conversation but close to its opening returns to
older material: widen recall. Any ``Embedder`` of ``convomem.recall`` works (sync or
async, ``embed_batch`` used when present); ``HashingEmbedder`` is the default.

The detector only measures and suggests; acting on it (a new segment, a wider recall)
is the caller's choice: ``ConversationMemory`` can report ``stats()`` beside its own.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, TypeAlias

from .. import _check
from ..errors import ConfigError, EmbeddingError
from ..model import Message
from .cache import _as_vector, _async_caller, _sync_caller
from .embedders import EmbedderLike, HashingEmbedder

__all__ = ["DriftAction", "DriftDetector", "DriftResult"]

DriftAction: TypeAlias = Literal["none", "new_segment", "widen_recall"]

NEW_SEGMENT: Final = (
    "The conversation topic has changed: start a new summary segment and recall by the new topic."
)
WIDEN_RECALL: Final = (
    "The message is far from the recent conversation but close to its opening topic: "
    "widen recall to older messages."
)


@dataclass(frozen=True, slots=True)
class DriftResult:
    """One message measured against the opening topic and the recent conversation.

    ``similarity`` is the better of ``topic_similarity`` and ``centroid_similarity``
    (cosines in [-1, 1]); ``score = 1 - similarity`` (0: on topic). ``drifted`` when
    ``similarity < threshold``: the message is near neither reference. ``action`` and
    ``suggestion`` say what to do; ``index`` counts the messages with text seen so far
    (this one included; the opening is 1).
    """

    drifted: bool
    score: float
    similarity: float
    topic_similarity: float
    centroid_similarity: float
    action: DriftAction
    suggestion: str | None
    index: int

    def as_dict(self) -> dict[str, Any]:
        """The result as a plain dict (the seed's ``check_drift`` keys included)."""
        return asdict(self)


_ON_TOPIC: Final = (1.0, 1.0)
_FORMAT: Final = "convomem.drift_detector/1"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _vector_or_none(value: Any, where: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ConfigError(f"state[{where!r}]={_short(value)}: must be a list of numbers or None")
    try:
        return tuple(_as_vector(value))
    except ValueError as exc:
        raise ConfigError(f"state[{where!r}]: {exc}") from None


def _unit(raw: Any, where: str) -> tuple[float, ...] | None:
    """The vector scaled to length 1, or None for a zero vector (a text-less message)."""
    try:
        values = _as_vector(raw)
    except ValueError as exc:
        raise EmbeddingError(f"{where}: {exc}") from None
    norm = math.sqrt(math.fsum(x * x for x in values))
    if norm == 0.0:
        return None
    return tuple(x / norm for x in values)


def _cosine(unit: Sequence[float], other: Sequence[float]) -> float:
    """Cosine of a unit vector with any vector (0 when ``other`` is zero)."""
    norm = math.sqrt(math.fsum(x * x for x in other))
    if norm == 0.0:
        return 0.0
    dot = math.fsum(a * b for a, b in zip(unit, other, strict=True))
    return max(-1.0, min(1.0, dot / norm))


class DriftDetector:
    """Detects topic drift: the opening topic and a running centroid vs each message.

    ``threshold`` (a cosine; the seed's ``drift_threshold``, 0.3 by default): a message
    whose cosine with both references is below it has drifted. ``centroid="ema"`` keeps
    ``c = (1 - alpha) * c + alpha * v`` over the unit vectors ``v`` of the messages;
    ``centroid="window"`` keeps the mean of the last ``window`` unit vectors. The
    centroid is compared *before* the message joins it. A blank message (no text, a
    zero vector) is not measured and changes nothing. ``check`` / ``acheck`` measure
    one message (a string or a ``Message``); ``check_many`` embeds a batch at once.

    Work counts (deterministic): ``embedded`` texts embedded, ``checks`` messages
    measured, ``drifts`` of them drifted; ``stats()`` reports them with the last result.
    """

    def __init__(
        self,
        embedder: EmbedderLike | None = None,
        *,
        threshold: float = 0.3,
        centroid: Literal["ema", "window"] = "ema",
        alpha: float = 0.3,
        window: int = 8,
    ) -> None:
        self.embedder: EmbedderLike = HashingEmbedder() if embedder is None else embedder
        if not callable(self.embedder) and not any(
            callable(getattr(self.embedder, n, None))
            for n in ("embed", "embed_batch", "aembed", "aembed_batch")
        ):
            raise ConfigError(f"embedder={embedder!r}: must be an Embedder or a function")
        self.threshold = _check.number("threshold", threshold, minimum=-1.0, maximum=1.0)
        self.centroid_mode = _check.one_of("centroid", centroid, ("ema", "window"))
        self.alpha = _check.fraction("alpha", alpha, low_open=True)
        self.window = _check.positive_int("window", window)
        self._sync = _sync_caller(self.embedder)
        self._async = _async_caller(self.embedder)
        self.embedded = 0
        self.checks = 0
        self.drifts = 0
        self._owner = _check.Owner()
        self.last: DriftResult | None = None
        self._topic: tuple[float, ...] | None = None
        self._centroid: list[float] | None = None
        self._recent: deque[tuple[float, ...]] = deque(maxlen=self.window)
        self._count = 0

    # -- references --------------------------------------------------------------------

    @property
    def topic(self) -> tuple[float, ...] | None:
        """The unit embedding of the opening topic (None before any text)."""
        return self._topic

    @property
    def centroid(self) -> tuple[float, ...] | None:
        """The running centroid of the messages seen (not normalized), or None."""
        if self.centroid_mode == "window":
            if not self._recent:
                return None
            n = len(self._recent)
            return tuple(math.fsum(col) / n for col in zip(*self._recent, strict=True))
        return None if self._centroid is None else tuple(self._centroid)

    def claim(self, owner: object) -> None:
        """Bind this detector to the one memory it checks (``ConfigError`` for a second):
        its opening topic and centroid are one conversation's."""
        self._owner.claim(owner, "drift", self)

    def reset(self) -> None:
        """Forget the topic and the centroid (counters are kept): the next message with
        text opens a new topic. Call it after acting on a drift, to follow the new one."""
        self._topic = None
        self._centroid = None
        self._recent.clear()
        self._count = 0

    def set_initial_topic(self, text: str | Message) -> None:
        """The seed's name: reset, then take ``text`` as the opening topic."""
        self.reset()
        self.check(text)

    # -- measuring ---------------------------------------------------------------------

    @staticmethod
    def _text(item: str | Message, where: str) -> str:
        if isinstance(item, Message):
            return item.text()
        if not isinstance(item, str):
            raise EmbeddingError(f"{where}={item!r}: must be a string or a Message")
        return item

    def _observe(self, unit: tuple[float, ...] | None) -> DriftResult:
        """Measure one embedded message against the references, then let it join them."""
        if unit is None:
            return self._result(*_ON_TOPIC, counted=False)
        if self._topic is None:
            self._topic = unit
            self._join(unit)
            self._count = 1
            return self._result(*_ON_TOPIC, counted=True)
        if len(unit) != len(self._topic):
            raise EmbeddingError(
                f"the embedder returned {len(unit)} numbers; the opening topic had "
                f"{len(self._topic)}"
            )
        centroid = self.centroid
        assert centroid is not None
        topic_sim = _cosine(unit, self._topic)
        centroid_sim = _cosine(unit, centroid)
        self._join(unit)
        self._count += 1
        return self._result(topic_sim, centroid_sim, counted=True)

    def _join(self, unit: tuple[float, ...]) -> None:
        if self.centroid_mode == "window":
            self._recent.append(unit)
        elif self._centroid is None:
            self._centroid = list(unit)
        else:
            a = self.alpha
            self._centroid = [
                (1.0 - a) * c + a * v for c, v in zip(self._centroid, unit, strict=True)
            ]

    def _result(self, topic_sim: float, centroid_sim: float, *, counted: bool) -> DriftResult:
        similarity = max(topic_sim, centroid_sim)
        drifted = similarity < self.threshold
        action: DriftAction = "none"
        suggestion = None
        if drifted:
            action, suggestion = "new_segment", NEW_SEGMENT
        elif centroid_sim < self.threshold:
            action, suggestion = "widen_recall", WIDEN_RECALL
        result = DriftResult(
            drifted,
            1.0 - similarity,
            similarity,
            topic_sim,
            centroid_sim,
            action,
            suggestion,
            self._count,
        )
        if counted:
            self.checks += 1
            self.drifts += drifted
            self.last = result
        return result

    def _embed(self, texts: list[str]) -> list[Any]:
        if self._sync is None:
            raise EmbeddingError(
                f"{self.embedder!r} is async only: use acheck / acheck_many in an event loop"
            )
        return self._outputs(self._sync(texts), len(texts))

    def _outputs(self, outputs: Any, n: int) -> list[Any]:
        rows = list(outputs)
        if len(rows) != n:
            raise EmbeddingError(f"the embedder returned {len(rows)} vectors for {n} texts")
        self.embedded += n
        return rows

    def _observe_all(self, texts: list[str], rows: list[Any]) -> list[DriftResult]:
        out: list[DriftResult] = []
        j = 0
        for t in texts:
            if not t.strip():
                out.append(self._observe(None))
                continue
            out.append(self._observe(_unit(rows[j], f"the embedding of {t[:40]!r}")))
            j += 1
        return out

    def check(self, message: str | Message) -> DriftResult:
        """Measure one message (then it joins the references)."""
        return self.check_many([message])[0]

    def check_many(self, messages: Sequence[str | Message]) -> list[DriftResult]:
        """``check`` each message in order, embedding the texts in one batch."""
        texts = [self._text(m, f"messages[{i}]") for i, m in enumerate(messages)]
        live = [t for t in texts if t.strip()]
        return self._observe_all(texts, self._embed(live) if live else [])

    async def acheck(self, message: str | Message) -> DriftResult:
        """Async twin of ``check`` (async embedders awaited natively)."""
        return (await self.acheck_many([message]))[0]

    async def acheck_many(self, messages: Sequence[str | Message]) -> list[DriftResult]:
        """Async twin of ``check_many``."""
        texts = [self._text(m, f"messages[{i}]") for i, m in enumerate(messages)]
        live = [t for t in texts if t.strip()]
        rows: list[Any] = []
        if live:
            if self._async is not None:
                rows = self._outputs(await self._async(live), len(live))
            elif self._sync is not None:  # a sync embedder must not block the loop
                sync = self._sync
                rows = self._outputs(await asyncio.to_thread(sync, live), len(live))
            else:
                rows = self._embed(live)
        return self._observe_all(texts, rows)

    def check_drift(self, current_message: str) -> dict[str, Any]:
        """The seed's interface: ``check`` as a dict (``drifted``, ``similarity``,
        ``suggestion`` and the rest of ``DriftResult``)."""
        return self.check(current_message).as_dict()

    # -- persistence -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The references and counters as plain JSON data (the embedder is code: pass it
        again); ``load_state`` resumes measuring exactly where this left off."""
        return {
            "format": _FORMAT,
            "centroid_mode": self.centroid_mode,
            "alpha": self.alpha,
            "window": self.window,
            "topic": None if self._topic is None else list(self._topic),
            "ema": self._centroid,
            "recent": [list(v) for v in self._recent],
            "count": self._count,
            "checks": self.checks,
            "drifts": self.drifts,
            "embedded": self.embedded,
            "last": None if self.last is None else self.last.as_dict(),
        }

    def load_state(self, data: Mapping[str, Any]) -> None:
        """Replace the references and counters with ``state()`` data of a detector with
        the same ``centroid``, ``alpha`` and ``window``. Bad data raises ``ConfigError``
        naming the field; nothing changes."""
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise ConfigError(f"state={_short(data)}: not a DriftDetector state")
        for key in ("centroid_mode", "alpha", "window"):
            if data.get(key) != getattr(self, key):
                raise ConfigError(
                    f"state[{key!r}]={data.get(key)!r}: this detector has {getattr(self, key)!r}"
                )
        topic = _vector_or_none(data.get("topic"), "topic")
        ema = _vector_or_none(data.get("ema"), "ema")
        recent_raw = data.get("recent")
        if not isinstance(recent_raw, list) or len(recent_raw) > self.window:
            raise ConfigError(
                f"state['recent']={_short(recent_raw)}: at most {self.window} vectors"
            )
        recent = [_vector_or_none(v, f"recent[{i}]") for i, v in enumerate(recent_raw)]
        counts = {}
        for key in ("count", "checks", "drifts", "embedded"):
            counts[key] = _check.non_negative_int(f"state[{key!r}]", data.get(key))
        last_raw = data.get("last")
        try:
            last = None if last_raw is None else DriftResult(**last_raw)
        except TypeError:
            raise ConfigError(f"state['last']={_short(last_raw)}: not a DriftResult") from None
        dims = {len(v) for v in (topic, ema, *recent) if v is not None}
        if (
            len(dims) > 1
            or any(v is None for v in recent)
            or (topic is None) != (counts["count"] == 0)
        ):
            raise ConfigError(f"state={_short(data)}: vectors of different lengths or missing")
        self._topic = topic
        self._centroid = None if ema is None else list(ema)
        self._recent = deque((v for v in recent if v is not None), maxlen=self.window)
        self._count = counts["count"]
        self.last = last
        self.checks, self.drifts, self.embedded = (
            counts["checks"],
            counts["drifts"],
            counts["embedded"],
        )

    def stats(self) -> dict[str, Any]:
        """Counters and the last result, for ``ConversationMemory.stats()``."""
        return {
            "checks": self.checks,
            "drifts": self.drifts,
            "embedded": self.embedded,
            "last": None if self.last is None else self.last.as_dict(),
        }

    def __repr__(self) -> str:
        return (
            f"DriftDetector(threshold={self.threshold}, centroid={self.centroid_mode!r}, "
            f"{self.checks} checks, {self.drifts} drifts)"
        )
