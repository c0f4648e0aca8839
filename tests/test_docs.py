"""The documentation: every Python block of the README and of docs/ runs, and the site
builds in strict mode (no broken link or anchor, no missing page or reference).

Blocks. Every fenced block whose language is ``python`` or ``py`` runs, in a fresh
namespace (a reader copies one block, not the whole page), with its output captured. A
block may be preceded, on the line just above its fence, by a marker that the page shows
nowhere (an HTML comment):

- ``<!-- run: continues -->``: the block runs in the namespace the page's previous block
  left (a page that builds one example in steps);
- ``<!-- run: service -->``: the block talks to a running service: the suite starts a
  ``convomem serve`` (over a SQLite file, its chat route on a local fake model) and sets
  ``$CONVOMEM_URL`` and ``$CONVOMEM_KEY`` (a key of a fresh tenant) for it;
- ``<!-- run: elsewhere -->``: the block is run by a test of its own page, which gives it
  what it needs (``tests/mcp/test_docs.py`` runs every block of ``docs/mcp.md`` in a
  fresh interpreter against ``convomem mcp`` and a real ``convomem serve``); only that
  page may say so;
- several at once: ``<!-- run: service, continues -->``.

A block that needs an extra says so in the prose and simply runs: ``make test``
installs every extra, so a missing one fails the block (``MissingDependency``), never
skips it. An unknown marker word fails, and so does a Python fence this file does not
collect (``python3``, say): no block is skipped without a word.

Files a page includes (``--8<-- "bench/README.md"``) are read too.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _fake_upstream import FakeUpstream, start
from _servers_app import create_key, spawn_replicas, wait_ready

ROOT = Path(__file__).resolve().parent.parent
MARKERS = frozenset({"continues", "service", "elsewhere"})
ELSEWHERE = {"docs/mcp.md": ROOT / "tests" / "mcp" / "test_docs.py"}
"""Pages whose blocks a test of their own runs (``elsewhere``), and that test."""

FENCE = re.compile(
    r"^(?:<!-- run: (?P<words>[^>]*?) -->\n)?"  # a marker on the line above
    r"```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$",
    re.M | re.S,
)
INCLUDE = re.compile(r'^--8<-- "([^":]+)', re.M)


@dataclass
class Block:
    page: str
    line: int
    code: str
    markers: frozenset[str]


@dataclass
class Chain:
    """A block and the blocks that continue it, run in one namespace."""

    blocks: list[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.blocks[0].page}:{self.blocks[0].line}"

    @property
    def markers(self) -> frozenset[str]:
        return frozenset().union(*(b.markers for b in self.blocks))


def pages() -> list[Path]:
    """README.md, every page of docs/, and what they include from elsewhere."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in list(found):
        for target in INCLUDE.findall(page.read_text()):
            path = ROOT / target
            if path not in found:
                found.append(path)
    return found


def blocks(path: Path) -> tuple[list[Block], list[str]]:
    """The Python blocks of a page, and the problems found (unknown markers, Python
    fences in another spelling)."""
    text = path.read_text()
    name = str(path.relative_to(ROOT))
    out: list[Block] = []
    problems: list[str] = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        lang = m.group("lang").lower()
        words = frozenset(w.strip() for w in (m.group("words") or "").split(",") if w.strip())
        if words - MARKERS:
            problems.append(f"{name}:{line}: unknown marker {sorted(words - MARKERS)}")
        if lang in ("python", "py"):
            out.append(Block(name, line, m.group("code"), words))
        elif lang.startswith("py") and lang != "pycon":
            problems.append(f"{name}:{line}: a ```{lang} fence is not run: use ```python")
        elif words:
            problems.append(f"{name}:{line}: a marker on a ```{lang} block")
    return out, problems


def chains() -> list[Chain]:
    out: list[Chain] = []
    for path in pages():
        previous: Chain | None = None
        for b in blocks(path)[0]:
            if "continues" in b.markers and previous is not None:
                previous.blocks.append(b)
                continue
            previous = Chain([b])
            out.append(previous)
    return out


CHAINS = chains()


def test_the_pages_have_blocks_and_no_block_goes_unrun() -> None:
    problems = [p for path in pages() for p in blocks(path)[1]]
    assert problems == []
    assert len(CHAINS) >= 30
    firsts = [c.blocks[0] for c in CHAINS]
    assert [f"{b.page}:{b.line}" for b in firsts if "continues" in b.markers] == []
    assert {"README.md", "docs/guides/packer.md", "docs/service/client.md"} <= {
        b.page for b in firsts
    }
    elsewhere = {b.page for b in firsts if "elsewhere" in b.markers}
    assert elsewhere <= set(ELSEWHERE)
    for page in elsewhere:
        assert ELSEWHERE[page].is_file() and page in ELSEWHERE[page].read_text()


def test_the_readme_links_to_files_that_exist() -> None:
    """The site checks its own links; the README (not part of it) is checked here."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(targets) >= 20
    assert [t for t in targets if "://" not in t and not (ROOT / t).exists()] == []


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A ``convomem serve`` whose chat route streams from a local fake model: its URL and
    its store's."""
    directory = tmp_path_factory.mktemp("docs-service")
    store = f"sqlite:///{directory / 'service.db'}"
    fake = FakeUpstream(reply="Your parcel left the depot on Monday.")
    upstream = start(fake)
    next(upstream)
    (replica,) = spawn_replicas(
        store,
        1,
        *("--upstream-url", fake.url, "--upstream-model", "fake", "--rate", "0"),
        directory=directory,
    )
    try:
        wait_ready([replica])
        yield replica.url, store
    finally:
        replica.stop()
        upstream.close()


RUN = [c for c in CHAINS if "elsewhere" not in c.markers]  # the others: ELSEWHERE runs them
# a chain that talks to the service needs a convomem serve process: the server tier
SERVED = pytest.mark.server


@pytest.mark.parametrize(
    "chain", [pytest.param(c, id=c.id, marks=[SERVED] * ("service" in c.markers)) for c in RUN]
)
def test_the_block_runs(
    chain: Chain, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "service" in chain.markers:
        url, store = request.getfixturevalue("service")
        monkeypatch.setenv("CONVOMEM_URL", url)
        monkeypatch.setenv("CONVOMEM_KEY", create_key(store, f"docs-{time.monotonic_ns()}"))
    namespace: dict[str, object] = {"__name__": "docs"}
    with contextlib.redirect_stdout(io.StringIO()):
        for b in chain.blocks:
            exec(compile(b.code, f"{b.page}:{b.line}", "exec"), namespace)


def test_the_site_builds_strictly_with_every_page_and_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site),
         "--config-file", str(ROOT / "mkdocs.yml")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    for page in (ROOT / "docs").rglob("*.md"):  # every page is in the nav, so built
        rel = page.relative_to(ROOT / "docs").with_suffix(".html")
        assert (site / rel).exists(), rel
    started = re.sub(r"<[^>]+>", "", (site / "getting-started.html").read_text())
    assert "mem.add(" in started and "pip install -e" in started  # the README's sections
    reference = (site / "reference" / "session.html").read_text()
    assert 'id="convomem.session.ConversationMemory"' in reference
    assert 'id="convomem.session.ConversationMemory.context"' in reference
    benches = re.sub(r"<[^>]+>", "", (site / "benchmarks.html").read_text())
    assert "Figures measured" in benches
