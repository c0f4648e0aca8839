"""The package's structure, enforced (docs/ARCHITECTURE.md, "Rooms").

Read from the source (``ast``), not from what happens to be imported: every import
counts, at module level, inside a function and under ``if TYPE_CHECKING:``. The rooms'
order is parsed from the block in docs/ARCHITECTURE.md, so the page and the test cannot
disagree. Offenders that remain are listed here by file, each with the reason and who
removes it; a new one fails, and so does a listed one that is gone (the lists shrink).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import convomem

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "convomem"
MAX_LINES = 400

# -- what remains to be fixed -----------------------------------------------------------

# (module, room it imports against the order): reason -- who removes it.
ORDER_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Import circles (their modules): reason -- who removes it.
CYCLE_EXCEPTIONS: dict[frozenset[str], str] = {}

# (file under src/convomem, private name reached): reason -- who removes it.
REACH_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Modules over MAX_LINES lines, with their size today as a ceiling: split them, then
# delete the line. Each: why it is still long.
LONG_MODULES: dict[str, tuple[int, str]] = {
    "model/messages.py": (417, "Message and its helpers; the block helpers could move out"),
    "session/memory.py": (
        488,
        "ConversationMemory: the documented public API (its options, sync and async twins "
        "of each operation, the read accessors); the logic is the engine's",
    ),
    "summaries/_keyed_rules.py": (438, "the keyed fact rules: the extraction helper's"),
    "summaries/extractive.py": (451, "the extractive summarizer: the extraction helper's"),
    "summaries/supersession.py": (429, "fact supersession: the extraction helper's"),
}

# Other libraries' public API spelled with a leading underscore.
PUBLIC_UNDERSCORE = frozenset(
    {"_getframe", "_asdict", "_replace", "_fields", "_make", "_name_", "_value_", "_missing_"}
)

# -- reading the source -----------------------------------------------------------------


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    imports: set[str] = field(default_factory=set)  # modules (and packages) it imports


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules ``node`` imports: ``from pkg import name`` is ``pkg.name`` when that
    is a module, else ``pkg`` (a name its ``__init__`` defines)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    return {
        f"{target}.{a.name}" if f"{target}.{a.name}" in _paths() else target for a in node.names
    }


@cache
def _paths() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


@cache
def modules() -> dict[str, Module]:
    out = {name: Module(name, path, ast.parse(path.read_text())) for name, path in _paths().items()}
    for mod in out.values():
        is_package = mod.path.name == "__init__.py"
        for node in ast.walk(mod.tree):  # every import: functions and TYPE_CHECKING too
            if isinstance(node, ast.Import | ast.ImportFrom):
                mod.imports.update(_imported(mod.name, is_package, node) & out.keys())
        mod.imports.discard(mod.name)
        # Importing a.b.c runs a.b's __init__ first (but not the importer's own packages).
        for name in list(mod.imports):
            parts = name.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if not mod.name.startswith(parent + "."):
                    mod.imports.add(parent)
        mod.imports.discard(mod.name)
    return out


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "convomem"


@cache
def room_tiers() -> dict[str, int]:
    """Each room's line in the block of docs/ARCHITECTURE.md's "Rooms" (0 = the lowest)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("\n## Rooms\n", 1)[1]
    block = section.split("```\n", 2)[1]
    lines = [line for line in block.splitlines() if line and not line[0].isspace()]
    tiers: dict[str, int] = {}
    for n, line in enumerate(reversed(lines)):
        names = re.split(r"\s{2,}", line.strip())[0]
        for name in names.split(" · "):
            assert re.fullmatch(r"[a-z_]+", name), line
            tiers[name] = n
    return tiers


# -- the rules --------------------------------------------------------------------------


def test_the_rooms_block_names_every_room() -> None:
    rooms = {room_of(m) for m in modules()}
    assert rooms == set(room_tiers()), rooms ^ set(room_tiers())


def order_offences() -> set[tuple[str, str]]:
    tiers = room_tiers()
    found: set[tuple[str, str]] = set()
    for mod in modules().values():
        mine = room_of(mod.name)
        for target in mod.imports:
            theirs = room_of(target)
            if theirs != mine and tiers[theirs] >= tiers[mine]:
                found.add((mod.name, theirs))
    return found


def test_lower_rooms_never_import_higher_ones() -> None:
    found = order_offences()
    new = sorted(found - set(ORDER_EXCEPTIONS))
    assert not new, f"imports against the order of docs/ARCHITECTURE.md: {new}"
    gone = sorted(set(ORDER_EXCEPTIONS) - found)
    assert not gone, f"fixed: delete them from ORDER_EXCEPTIONS: {gone}"


def cycles() -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {name: sorted(mod.imports) for name, mod in modules().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            edges = graph[node]
            if i < len(edges):
                work.append((node, i + 1))
                nxt = edges[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_no_import_cycles() -> None:
    found = set(cycles())
    new = [sorted(c) for c in found - set(CYCLE_EXCEPTIONS)]
    assert not new, f"import circles: {new}"
    gone = [sorted(c) for c in set(CYCLE_EXCEPTIONS) - found]
    assert not gone, f"fixed: delete them from CYCLE_EXCEPTIONS: {gone}"


def test_the_cycle_finder_finds_cycles() -> None:
    """The checker itself: a circle through a package's __init__ is found."""
    saved = {name: set(mod.imports) for name, mod in modules().items()}
    try:
        modules()["convomem.model.messages"].imports.add("convomem.views")
        assert any("convomem.views" in c and "convomem.model" in c for c in cycles())
    finally:
        for name, imports in saved.items():
            modules()[name].imports = imports


def _defined_names(tree: ast.Module) -> set[str]:
    """Every name a module defines: defs, classes, slots, assigned names and attributes."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            own.add(node.attr)  # an attribute its own objects set
        elif isinstance(node, ast.Assign):
            targets = [t for t in node.targets if isinstance(t, ast.Name)]
            if any(t.id == "__slots__" for t in targets):
                own.update(
                    c.value
                    for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
    return own


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    # super()._x, type(self)._x
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and (node.func.id == "super" or (node.func.id == "type" and _is_self(node.args[0])))
    )


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORE


def private_reaches() -> dict[tuple[str, str], list[str]]:
    """``(file, _name) -> ["line: expression", ...]`` of every reach into another
    module's private attribute."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for mod in modules().values():
        own = _defined_names(mod.tree)
        rel = mod.path.relative_to(SRC).as_posix()
        for node in ast.walk(mod.tree):
            reached: str | None = None
            if isinstance(node, ast.Attribute) and not _is_self(node.value):
                reached = node.attr
            elif (
                isinstance(node, ast.Call)
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and ast.unparse(node.func)
                in ("getattr", "setattr", "hasattr", "delattr", "object.__setattr__")
                and not _is_self(node.args[0])
            ):
                reached = node.args[1].value
            if reached is not None and _private(reached) and reached not in own:
                found[(rel, reached)].append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_module_reaches_into_another_modules_privates() -> None:
    found = private_reaches()
    new = {k: v for k, v in found.items() if k not in REACH_EXCEPTIONS}
    assert not new, f"private reaches (x._y, _y defined in another module): {new}"
    gone = sorted(set(REACH_EXCEPTIONS) - set(found))
    assert not gone, f"fixed: delete them from REACH_EXCEPTIONS: {gone}"


def test_the_reach_finder_finds_reaches() -> None:
    tree = ast.parse(
        "class A:\n"
        "    __slots__ = ('_mine',)\n"
        "    def f(self, other):\n"
        "        self._x = other._mine\n"
        "        super()._y()\n"
        "        return other._theirs, getattr(other, '_hidden'), other._x, other.public\n"
    )
    own = _defined_names(tree)
    assert {"_mine", "_x", "f", "A"} <= own and "_theirs" not in own
    attrs = [
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and not _is_self(n.value) and _private(n.attr)
    ]
    assert sorted(a for a in attrs if a not in own) == ["_theirs"]


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        mod.path.relative_to(SRC).as_posix(): len(mod.path.read_text().splitlines())
        for mod in modules().values()
    }
    long = {path: n for path, n in sizes.items() if n > MAX_LINES}
    new = {p: n for p, n in long.items() if p not in LONG_MODULES}
    assert not new, f"modules over {MAX_LINES} lines (split them): {new}"
    grown = {
        p: (n, LONG_MODULES[p][0]) for p, n in long.items() if n > LONG_MODULES.get(p, (n,))[0]
    }
    assert not grown, f"listed long modules that grew (lines, ceiling): {grown}"
    gone = sorted(p for p in LONG_MODULES if sizes.get(p, 0) <= MAX_LINES)
    assert not gone, f"now short (or gone): delete them from LONG_MODULES: {gone}"
    smaller = {p: (sizes[p], c) for p, (c, _) in LONG_MODULES.items() if p in long and sizes[p] < c}
    assert not smaller, f"shrunk: lower their ceilings in LONG_MODULES (lines, ceiling): {smaller}"


def test_one_vocabulary_of_io_requests() -> None:
    """``Call`` and ``Sleep`` are ``_io``'s; no room defines requests of its own by
    those names (the client's ``Request`` is data its transport performs)."""
    where: dict[str, list[str]] = defaultdict(list)
    for mod in modules().values():
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.ClassDef) and node.name.strip("_") in ("Call", "Sleep"):
                where[node.name].append(mod.name)
    assert dict(where) == {"Call": ["convomem._io"], "Sleep": ["convomem._io"]}


# -- the root import --------------------------------------------------------------------


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_convomem_loads_only_the_errors() -> None:
    loaded = _fresh(
        "import sys, convomem; print(sorted(m for m in sys.modules if m.startswith('convomem')))"
    )
    assert loaded == str(["convomem", "convomem._version", "convomem.errors"])


def test_every_root_name_imports_and_only_the_seeds_names_load_compat() -> None:
    seeds = {"ConversationMemoryManager", "SlidingWindowMemory", "TokenBudgetManager"}
    names = sorted(set(convomem.__all__) - seeds) + sorted(seeds)
    got = _fresh(
        "import sys, convomem\n"
        f"for name in {names!r}:\n"
        "    exec(f'from convomem import {name} as value')\n"
        "    assert value is getattr(convomem, name) is not None, name\n"
        "    print(name, 'convomem.compat' in sys.modules)\n"
    )
    assert got.splitlines() == [f"{n} {n in seeds}" for n in names]


def test_the_root_names_its_rooms_and_refuses_unknown_names() -> None:
    assert _fresh("import convomem; print(convomem.stores.open_store.__module__)") == (
        "convomem.stores.opening"
    )
    assert {"stores", "Message", "compat"} <= set(dir(convomem))
    out = subprocess.run(
        [sys.executable, "-c", "import convomem; convomem.nothing_here"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "has no attribute 'nothing_here'" in out.stderr
