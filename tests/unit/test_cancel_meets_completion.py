"""A cancellation that arrives in the same loop turn as the awaited thing completing is not lost.

Python 3.11's ``asyncio.wait_for`` returns the inner result when the outer task is cancelled
just as the inner one finishes, swallowing the cancellation (fixed in 3.12).  A loop that is
stopped by cancelling it then never stops: a batch worker's ``stop()`` hung this way in a test
run, its idle slots polling forever.  The project waits with ``asyncio.timeout`` instead, and
``test_layout`` keeps ``asyncio.wait_for`` out of the code.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any, cast

from deerflow.subagents.batches.worker import BatchWorker


class IdleQueue:
    """A batch store with nothing to claim (only what an idle slot asks of ``store.aio``)."""

    def __init__(self) -> None:
        self.claims = 0
        self.aio = self

    async def claim(self, owner: str, lease_seconds: float) -> list[Any]:
        self.claims += 1
        return []

    async def unfinished(self) -> int:
        return 1

    async def renew(self, owner: str, lease_seconds: float) -> None:
        return None

    async def cancel_requested(self, *args: Any) -> list[Any]:
        return []

    async def reap_cancelled(self) -> None:
        return None


async def test_a_stop_in_the_same_turn_as_a_wake_up_still_stops_the_worker() -> None:
    queue = IdleQueue()
    worker = BatchWorker(cast(Any, queue), cast(Any, None), concurrency=2, lease_seconds=30, poll_interval=30)
    task = worker.start()
    for _ in range(100):  # until both slots wait for a wake-up
        await asyncio.sleep(0)
        if queue.claims >= 2:
            break
    for _ in range(5):
        await asyncio.sleep(0)
    assert worker._wake is not None
    worker._wake.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:  # leave nothing running: cancel until it ends
        while not task.done():
            task.cancel()
            await asyncio.sleep(0.01)
    assert done, "the worker swallowed its cancellation and kept polling"


ROOT = Path(__file__).resolve().parents[2]
CODE = [ROOT / "harness" / "deerflow", ROOT / "extension" / "deerflow_jupyter", ROOT / "deerflow_kernel"]


def _wait_for_calls(roots: list[Path], base: Path = ROOT) -> list[str]:
    """``file:line`` of each ``asyncio.wait_for`` (or ``wait_for`` imported from asyncio) under ``roots``."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and node.module == "asyncio" for alias in node.names if alias.name == "wait_for"}
            for node in ast.walk(tree):
                func = node.func if isinstance(node, ast.Call) else None
                if (isinstance(func, ast.Attribute) and func.attr == "wait_for" and isinstance(func.value, ast.Name)
                        and func.value.id == "asyncio") or (isinstance(func, ast.Name) and func.id in imported):
                    found.append(f"{path.relative_to(base)}:{node.lineno}")
    return found


def test_the_code_waits_with_asyncio_timeout_not_wait_for() -> None:
    assert _wait_for_calls(CODE) == []


def test_the_wait_for_check_sees_both_spellings(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import asyncio\nasync def f(x):\n    return await asyncio.wait_for(x, 1)\n")
    (tmp_path / "b.py").write_text("from asyncio import wait_for as w\nasync def f(x):\n    return await w(x, 1)\n")
    (tmp_path / "ok.py").write_text("async def f(cond):\n    await cond.wait_for(lambda: True)\n")
    assert _wait_for_calls([tmp_path], tmp_path) == ["a.py:3", "b.py:3"]
