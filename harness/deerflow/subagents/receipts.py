"""Receipts: what a subagent's tool calls actually did, and whether its report agrees.

A subagent's final report is a *self-report*.  The harness keeps its own
record: every tool call the child makes gets a receipt ``rN`` (tool name, a
digest of its arguments, status, the virtual paths it touched) the moment it
starts, updated when it ends.  The child sees its receipt id in each tool
result so it can cite ``[rN]`` in its report; afterwards
:func:`check_citations` compares those citations with the receipts.  That
check is *execution evidence only*: a cited receipt proves a call ran (and
how it ended), not that the claim next to it is true.

:class:`ReceiptLedger` is written from the child's event loop and read from
the parent's (progress polling, a safety timeout taking the latest receipts),
so it is guarded by a lock and hands out copies.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

ReceiptStatus = Literal["running", "ok", "error", "refused", "interrupted"]

WRITE_TOOLS = frozenset({"write_file", "str_replace"})
_PATH_KEYS = ("path", "file_path", "target", "destination")
_CITATION = re.compile(r"\[\s*(r\d+(?:\s*,\s*r\d+)*)\s*\]")


def args_digest(args: Mapping[str, Any]) -> str:
    """A short stable digest of a call's arguments (canonical JSON, sha256)."""
    canonical = json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def touched_paths(args: Mapping[str, Any], artifact: Any = None) -> tuple[str, ...]:
    """Virtual paths a call names in its arguments, plus files its result reports."""
    found: list[str] = []
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    for key in ("paths", "filepaths"):
        values = args.get(key)
        if isinstance(values, list):
            found.extend(v for v in values if isinstance(v, str))
    if isinstance(artifact, Mapping) and isinstance(artifact.get("files"), list):
        found.extend(f for f in artifact["files"] if isinstance(f, str))
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class Receipt:
    """The harness's record of one tool call a subagent made."""

    id: str
    tool: str
    args_digest: str
    status: ReceiptStatus
    paths: tuple[str, ...] = ()
    wrote: bool = False
    code: str | None = None
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["paths"] = list(self.paths)
        return data

    def line(self) -> str:
        """``r3 write_file ok /mnt/user-data/outputs/a.md`` for the lead's result text."""
        paths = f" {', '.join(self.paths)}" if self.paths else ""
        code = f" ({self.code})" if self.code else ""
        return f"{self.id} {self.tool} {self.status}{code}{paths}"


class ReceiptLedger:
    """The receipts of one subagent execution, numbered ``r1``, ``r2``... in call order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._receipts: list[Receipt] = []

    def open(self, tool: str, args: Mapping[str, Any]) -> Receipt:
        """Record a call as it starts (status ``running``)."""
        with self._lock:
            receipt = Receipt(f"r{len(self._receipts) + 1}", tool, args_digest(args), "running",
                              touched_paths(args))
            self._receipts.append(receipt)
            return receipt

    def close(self, receipt_id: str, status: ReceiptStatus, *, code: str | None = None,
              artifact: Any = None) -> Receipt:
        """Record how the call ended (paths its result reports are added)."""
        with self._lock:
            index = int(receipt_id[1:]) - 1
            current = self._receipts[index]
            extra = touched_paths({}, artifact)
            done = replace(current, status=status, code=code, finished_at=time.time(),
                           paths=tuple(dict.fromkeys((*current.paths, *extra))),
                           wrote=status == "ok" and current.tool in WRITE_TOOLS)
            self._receipts[index] = done
            return done

    def snapshot(self, *, interrupted: bool = False) -> list[Receipt]:
        """A copy of the receipts; with ``interrupted``, calls still running are marked so."""
        with self._lock:
            receipts = list(self._receipts)
        if interrupted:
            receipts = [replace(r, status="interrupted") if r.status == "running" else r for r in receipts]
        return receipts

    def __len__(self) -> int:
        with self._lock:
            return len(self._receipts)


@dataclass(frozen=True)
class CitationCheck:
    """How a report's ``[rN]`` citations compare with the receipts (execution evidence only).

    Attributes:
        cited: Receipt ids the report cites, in order of first appearance.
        unknown: Cited ids with no receipt (the call never happened).
        failed: Cited ids whose call did not end ``ok``.
        uncited: Receipts the report does not mention.
    """

    cited: tuple[str, ...]
    unknown: tuple[str, ...]
    failed: tuple[str, ...]
    uncited: tuple[str, ...]

    @property
    def verdict(self) -> str:
        """``unknown_citations``, ``cites_unsuccessful_calls``, ``no_citations`` or ``consistent``."""
        if self.unknown:
            return "unknown_citations"
        if self.failed:
            return "cites_unsuccessful_calls"
        return "consistent" if self.cited else "no_citations"

    @property
    def flagged(self) -> bool:
        return bool(self.unknown or self.failed)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "cited": list(self.cited), "unknown": list(self.unknown),
                "failed": list(self.failed), "uncited": list(self.uncited)}

    def summary(self) -> str:
        """One line for the lead."""
        parts = [f"cites {', '.join(self.cited)}" if self.cited else "cites no receipts"]
        if self.unknown:
            parts.append(f"FLAGGED: cites receipts that do not exist: {', '.join(self.unknown)}")
        if self.failed:
            parts.append(f"FLAGGED: cites calls that did not succeed: {', '.join(self.failed)}")
        return "; ".join(parts)


def cited_ids(report: str) -> tuple[str, ...]:
    """The ``rN`` ids a report cites as ``[rN]`` or ``[rN, rM]``."""
    ids: list[str] = []
    for group in _CITATION.findall(report):
        ids.extend(part.strip() for part in group.split(","))
    return tuple(dict.fromkeys(ids))


def check_citations(report: str, receipts: Sequence[Receipt]) -> CitationCheck:
    """Cross-check a report's citations against the receipts."""
    by_id = {r.id: r for r in receipts}
    cited = cited_ids(report)
    unknown = tuple(c for c in cited if c not in by_id)
    failed = tuple(c for c in cited if c in by_id and by_id[c].status != "ok")
    uncited = tuple(r.id for r in receipts if r.id not in cited)
    return CitationCheck(cited, unknown, failed, uncited)


__all__ = ["WRITE_TOOLS", "CitationCheck", "Receipt", "ReceiptLedger", "ReceiptStatus", "args_digest",
           "check_citations", "cited_ids", "touched_paths"]
