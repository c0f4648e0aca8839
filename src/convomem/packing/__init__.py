"""Packing: decide which messages of a list are sent under a token budget."""

from .._io import Call
from .classify import OK, ORPHAN, STUBBED, UNANSWERED, Stubber, Unanswered, countable_stub
from .packer import Packer
from .plan import (
    PlanGen,
    Selection,
    StartOn,
    Strategy,
    assemble,
    run_plan,
    run_plan_async,
)
from .provider import PackedAnthropic, PackedOpenAI
from .recency import Recency
from .result import REASONS, Decision, PackResult, check_budget
from .stages import ChunkStrategy, Pipeline, Stage, Window, as_strategy, runs_of
from .table import ChunkTable, Placement

__all__ = [
    "OK",
    "ORPHAN",
    "REASONS",
    "STUBBED",
    "UNANSWERED",
    "Call",
    "ChunkStrategy",
    "ChunkTable",
    "Decision",
    "PackResult",
    "PackedAnthropic",
    "PackedOpenAI",
    "Packer",
    "Pipeline",
    "Placement",
    "PlanGen",
    "Recency",
    "Selection",
    "Stage",
    "StartOn",
    "Strategy",
    "Stubber",
    "Unanswered",
    "Window",
    "as_strategy",
    "assemble",
    "check_budget",
    "countable_stub",
    "run_plan",
    "run_plan_async",
    "runs_of",
]
