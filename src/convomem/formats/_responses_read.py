"""Reading Responses API input items into convomem messages.

The parsing half of ``convomem.formats.openai_responses``; see that module for the
mapping. Each item becomes one message; what the message's blocks do not say (the item's
``type`` when it is not implied, ids, ``status``, annotations, unknown keys) is kept as
a patch against the canonical rendering (``_responses_diff``) in ``metadata[META]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..errors import InvalidMessage
from ..model import (
    Block,
    ImageBlock,
    OpaqueBlock,
    ResultPart,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._common import at_block

META: Final = "openai_responses"
"""The provider of opaque blocks and the ``Message.metadata`` key this format uses."""

TEXT_PARTS: Final = frozenset({"input_text", "output_text"})
ROLES: Final = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
CALL_KINDS: Final = frozenset({"function_call", "custom_tool_call"})
OUTPUT_KINDS: Final = frozenset({"function_call_output", "custom_tool_call_output"})
# Client-executed tool calls kept opaque but paired with their outputs by call_id, so a
# view never sends an output without its call (the API rejects that).
PAIRED_CALLS: Final = frozenset({"computer_call", "shell_call", "apply_patch_call"})
PAIRED_OUTPUTS: Final = frozenset(
    {"computer_call_output", "shell_call_output", "apply_patch_call_output"}
)


def _invalid(where: str, value: Any, problem: str) -> InvalidMessage:
    return InvalidMessage(where, value, problem)


def _block(make: Any, where: str, *args: Any) -> Any:
    """``make(*args)``, a block constructor's ``InvalidMessage`` placed at ``where``."""
    try:
        return make(*args)
    except InvalidMessage as exc:
        raise at_block(where, exc) from None


def _part(raw: Any, where: str) -> ResultPart:
    """One content part: text and image parts are read, anything else kept opaque."""
    if not isinstance(raw, Mapping):
        raise _invalid(where, raw, "a content part must be an object")
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise _invalid(where + ".type", kind, "a content part needs a type")
    if kind in TEXT_PARTS:
        if not isinstance(raw.get("text"), str):
            raise _invalid(where + ".text", raw.get("text"), f"an {kind} part needs a string")
        return _block(TextBlock, where, raw["text"])  # type: ignore[no-any-return]
    url = raw.get("image_url")
    if kind == "input_image" and isinstance(url, str) and url:
        return _block(ImageBlock, where, url)  # type: ignore[no-any-return]
    if kind == "refusal" and not isinstance(raw.get("refusal"), str):
        raise _invalid(where + ".refusal", raw.get("refusal"), "a refusal part needs a string")
    return OpaqueBlock(META, raw)


def _parts(content: Any, where: str) -> list[ResultPart]:
    if not isinstance(content, list | tuple):
        raise _invalid(where, content, "must be a string or a list of content parts")
    return [_part(p, f"{where}[{j}]") for j, p in enumerate(content)]


def _str_field(item: Mapping[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    value = item.get(key)
    if not isinstance(value, str) or (not value and not empty):
        kind = item.get("type")
        raise _invalid(f"{where}.{key}", value, f"a {kind} item needs a non-empty string")
    return value


def _arguments(text: str) -> Mapping[str, Any] | str:
    """Arguments parsed when they are a JSON object ``json.dumps`` writes identically;
    else the exact text (the SDK's compact JSON included), so the round trip is exact."""
    if not text:
        return text
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(loaded, dict) and json.dumps(loaded, ensure_ascii=False) == text:
        return loaded
    return text


def _call(item: Mapping[str, Any], kind: str, where: str) -> ToolUseBlock:
    call_id = _str_field(item, "call_id", where)
    name = _str_field(item, "name", where)
    key = "arguments" if kind == "function_call" else "input"
    text = _str_field(item, key, where, empty=True)
    parsed = _arguments(text) if kind == "function_call" else text
    try:
        return ToolUseBlock(call_id, name, parsed)
    except InvalidMessage as exc:
        if not isinstance(parsed, str):  # too deep as a value: keep the text
            return _block(ToolUseBlock, where, call_id, name, text)  # type: ignore[no-any-return]
        raise at_block(where, exc, {"id": "call_id", "input": key}) from None


def _output(item: Mapping[str, Any], where: str) -> ToolResultBlock:
    call_id = _str_field(item, "call_id", where)
    output = item.get("output")
    content = output if isinstance(output, str) else tuple(_parts(output, where + ".output"))
    try:
        return ToolResultBlock(call_id, content)
    except InvalidMessage as exc:
        raise at_block(where, exc, {"tool_use_id": "call_id", "content": "output"}) from None


def _screenshot(item: Mapping[str, Any]) -> str | None:
    """The image URL of a computer call's screenshot output, when it has one."""
    output = item.get("output")
    if item.get("type") == "computer_call_output" and isinstance(output, Mapping):
        url = output.get("image_url")
        if output.get("type") == "computer_screenshot" and isinstance(url, str) and url:
            return url
    return None


def read_item(data: Any, where: str) -> tuple[str, str, str | list[Block]]:
    """``(kind, role, content)`` of one item; ``kind`` selects its canonical rendering."""
    if not isinstance(data, Mapping):
        raise _invalid(where, data, "an item must be an object")
    kind = data.get("type")
    if kind is None and "role" not in data:
        if isinstance(data.get("id"), str):  # an item_reference may omit its type
            return "item", "assistant", [OpaqueBlock(META, data)]
        raise _invalid(where + ".type", kind, "an item needs a type or a role")
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise _invalid(where + ".type", kind, "must be a non-empty string")
    if kind is None or kind == "message":
        role = data.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _invalid(where + ".role", role, f"must be one of {sorted(ROLES)}")
        content = data.get("content")
        form = "easy" if kind is None else "message"  # its canonical has "type" or not
        if isinstance(content, str):
            return form, ROLES[role], content
        return form, ROLES[role], list(_parts(content, where + ".content"))
    if kind in CALL_KINDS:
        return kind, "assistant", [_call(data, kind, where)]
    if kind in OUTPUT_KINDS and data.get("call_id") is not None:
        return kind, "tool", [_output(data, where)]
    if kind in PAIRED_CALLS or kind in PAIRED_OUTPUTS:
        call_id = _str_field(data, "call_id", where)
        if kind in PAIRED_CALLS:
            use = _block(ToolUseBlock, where + ".call_id", call_id, kind)
            return "item", "assistant", [use, OpaqueBlock(META, data)]
        url = _screenshot(data)
        if url is not None:
            image = _block(ImageBlock, where + ".output.image_url", url)
            return kind, "tool", [ToolResultBlock(call_id, (image,))]
        return "item", "tool", [ToolResultBlock(call_id, (OpaqueBlock(META, data),))]
    return "item", "assistant", [OpaqueBlock(META, data)]
