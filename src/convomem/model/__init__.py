"""The data model: messages, content blocks, tool-pair chunks and pins."""

from .blocks import (
    BLOCK_TYPES,
    Block,
    ImageBlock,
    OpaqueBlock,
    ResultPart,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .chunks import (
    STUB_RESULT,
    Chunk,
    ChunkBuilder,
    PairProblem,
    group_pairs,
    repair_pairs,
    stub_result,
    validate_pairs,
)
from .messages import DERIVED_ID_PREFIX, ROLES, Message, Role, is_derived_id, new_id
from .pins import (
    COMPRESSED_KEY,
    PIN_NAMES,
    PinPolicy,
    PinSpec,
    check_pins,
    resolve_pins,
    starts_turn,
)

__all__ = [
    "BLOCK_TYPES",
    "COMPRESSED_KEY",
    "DERIVED_ID_PREFIX",
    "PIN_NAMES",
    "ROLES",
    "STUB_RESULT",
    "Block",
    "Chunk",
    "ChunkBuilder",
    "ImageBlock",
    "Message",
    "OpaqueBlock",
    "PairProblem",
    "PinPolicy",
    "PinSpec",
    "ResultPart",
    "Role",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "check_pins",
    "group_pairs",
    "is_derived_id",
    "new_id",
    "repair_pairs",
    "resolve_pins",
    "starts_turn",
    "stub_result",
    "validate_pairs",
]
