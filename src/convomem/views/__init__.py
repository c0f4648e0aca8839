"""Views: the incremental window over a conversation and the budget arithmetic."""

from .budget import (
    REPLY_PRIMING_TOKENS,
    ContextBudget,
)
from .window import (
    History,
    longest_fitting_run,
)

__all__ = [
    "REPLY_PRIMING_TOKENS",
    "ContextBudget",
    "History",
    "longest_fitting_run",
]
