"""``convomem keys create|list|revoke``: the key printed once, alone on the last line."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _cli_support import one_line_failure, run
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store


def _verify(url: str, key: str) -> str | None:
    async def go() -> str | None:
        db = await aopen_store(url)
        try:
            record = await KeyStore(db).verify(key)
            return None if record is None else record.tenant
        finally:
            await db.aclose()

    return asyncio.run(go())


def test_create_list_revoke(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    code, out, err = run("keys", "create", "--tenant", "acme", "--name", "ci", "--store", url)
    assert code == 0, err
    key = out.splitlines()[-1]
    assert key.startswith("cm_") and key == key.strip() and " " not in key
    assert _verify(url, key) == "acme"
    key_id = key.split("_")[1]
    code, listing, _ = run("keys", "list", "--store", url)
    assert code == 0 and key_id in listing and "acme" in listing and "live" in listing
    assert key not in listing and key.split("_", 2)[2] not in listing
    assert run("keys", "revoke", key_id, "--store", url)[0] == 0
    assert "revoked" in run("keys", "list", "--store", url)[1]
    assert _verify(url, key) is None
    one_line_failure(*run("keys", "revoke", key_id, "--store", url))
    one_line_failure(*run("keys", "create", "--tenant", "a/b", "--store", url))
