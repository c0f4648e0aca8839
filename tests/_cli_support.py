"""Running the command line in-process, for the CLI tests of every room."""

from __future__ import annotations

import io
import sys

from convomem.cli import main


def run(*argv: str, stdin: str | bytes | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process, capturing stdout and stderr."""
    out = io.StringIO()
    err = io.StringIO()
    old_err, old_in = sys.stderr, sys.stdin
    sys.stderr = err
    if isinstance(stdin, bytes):
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    elif stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(list(argv), out=out)
    finally:
        sys.stderr, sys.stdin = old_err, old_in
    return code, out.getvalue(), err.getvalue()


def one_line_failure(code: int, out: str, err: str) -> None:
    assert code == 2, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("convomem") and "error" in err
    assert "Traceback" not in err
