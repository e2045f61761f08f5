"""The execution-local record of one subagent, shared by its middlewares and its supervisor.

Child graphs are compiled once and reused, so nothing about a particular
execution may live on a middleware instance.  Each execution gets one
:class:`ChildRun`, placed in the child's ``RunContext.services`` under
``subagent_run``: the receipts ledger, the limits, the tool
allowlist, turn and token counters, the stop reason, and the narrow
``record`` hook to the parent (a :class:`~deerflow.subagents.recorder.ParentLoopRecorder`
or nothing).  The child's middlewares write it on the controller loop; the
supervisor reads snapshots from the parent's loop, hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from deerflow.runtime.services import services_of
from deerflow.subagents.receipts import ReceiptLedger
from deerflow.subagents.registry import FORBIDDEN_CHILD_TOOLS, SubagentLimits

Record = Callable[[str, Mapping[str, Any]], Any]


class ChildRun:
    """One subagent execution as its middlewares and supervisor see it.

    A plain class (it travels in the child's ``RunContext.services``; see
    :class:`~deerflow.subagents.runtime.SubagentRuntime` for why).

    Attributes:
        task_id: The delegation id (ledger entry id, event ``task_id``).
        limits: Turn, token and time limits.
        allowed_tools: Allowlist layers (the type's tools, its skills, the parent's
            active skills): a tool is permitted when it matches a name or glob
            pattern of *every* layer, i.e. the intersection.  No layers: any tool
            it was given, still minus :data:`FORBIDDEN_CHILD_TOOLS`.
        receipts_enabled: Whether receipt ids are shown to the child.
        record: Where middleware records go (``None``: nowhere, e.g. batch items).
    """

    def __init__(self, task_id: str, limits: SubagentLimits, allowed_tools: tuple[frozenset[str], ...] = (),
                 receipts_enabled: bool = True, record: Record | None = None) -> None:
        self.task_id = task_id
        self.limits = limits
        self.allowed_tools = allowed_tools
        self.receipts_enabled = receipts_enabled
        self.record = record
        self.receipts = ReceiptLedger()
        self.stop_reason: str | None = None
        self._lock = threading.Lock()
        self._turns = 0
        self._usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}

    def __repr__(self) -> str:
        return f"ChildRun({self.task_id!r}, receipts={len(self.receipts)}, stop={self.stop_reason!r})"

    def permits(self, tool: str) -> bool:
        """Whether the child may run ``tool`` (never a forbidden one)."""
        if tool in FORBIDDEN_CHILD_TOOLS:
            return False
        return all(any(fnmatchcase(tool, p) for p in layer) for layer in self.allowed_tools)

    def add_turn(self, usage: Mapping[str, Any] | None) -> None:
        """Count one model answer and its token usage."""
        with self._lock:
            self._turns += 1
            for key in self._usage:
                value = (usage or {}).get(key)
                if isinstance(value, int):
                    self._usage[key] += value

    def progress(self) -> tuple[int, dict[str, int]]:
        """Turns and usage so far (a copy)."""
        with self._lock:
            return self._turns, dict(self._usage)

    def stop(self, reason: str) -> None:
        """Remember why the child was stopped (the first reason wins)."""
        with self._lock:
            if self.stop_reason is None:
                self.stop_reason = reason

    def emit(self, key: str, payload: Mapping[str, Any]) -> None:
        """Send a record to the parent's journal, if there is one."""
        if self.record is not None:
            self.record(key, {"task_id": self.task_id, **payload})


def child_run_of(runtime: Any) -> ChildRun | None:
    """The :class:`ChildRun` of a middleware's or tool's runtime (None outside a subagent)."""
    found = services_of(getattr(runtime, "context", None)).subagent_run
    return found if isinstance(found, ChildRun) else None


__all__ = ["ChildRun", "child_run_of"]
