"""Packing: decide which messages of a list are sent under a token budget."""

from .packer import (
    Packer,
)
from .plan import (
    Call,
    ChunkStrategy,
    Pipeline,
    PlanGen,
    Selection,
    Stage,
    Strategy,
    Window,
    as_strategy,
    assemble,
    run_plan,
    run_plan_async,
    runs_of,
)
from .result import (
    REASONS,
    Decision,
    PackResult,
    check_budget,
)
from .table import (
    OK,
    ORPHAN,
    STUBBED,
    UNANSWERED,
    ChunkTable,
    Placement,
    Stubber,
    Unanswered,
    countable_stub,
)

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
    "Packer",
    "Pipeline",
    "Placement",
    "PlanGen",
    "Selection",
    "Stage",
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
