"""A run's file bookkeeping: snapshot before, change summary and receipt after.

:class:`DeliveryWatch` is the run path's single hook into
:mod:`deerflow.sandbox.files.changes` and :mod:`deerflow.runs.receipt`.  The
"before" snapshot reads every small file, so it runs in a worker thread.  The
settlement after the graph ends is synchronous on purpose: it reuses the
"before" entries of untouched files (only what the run changed is read), and
having no await between the end of the graph and ``run_finished`` means a
second cancellation cannot lose the summary or the receipt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.runs.receipt import DeliveryReceipt, build_receipt, receipt_notice
from deerflow.runtime import events as ev
from deerflow.runtime.projection import Projector
from deerflow.sandbox.files.changes import (
    ChangeLimits,
    ChangeSummary,
    Snapshot,
    diff_snapshots,
    take_snapshot,
)
from deerflow.tools.offload import OFFLOADER


@dataclass
class Settlement:
    """What a run changed and delivered, and the events that say so."""

    changes: ChangeSummary | None = None
    receipt: DeliveryReceipt | None = None
    events: list[Any] = field(default_factory=list)


logger = logging.getLogger(__name__)

SNAPSHOT_DEADLINE_S = 60.0
"""How long a workspace snapshot or change summary may take before the run goes on without."""


class DeliveryWatch:
    """Snapshots one thread's workspace and outputs around a run."""

    def __init__(self, paths: ThreadPaths, *, limits: ChangeLimits | None = None, new_thread: bool = False) -> None:
        self.paths = paths
        self.limits = limits or ChangeLimits()
        self.new_thread = new_thread
        self._before: Snapshot | None = None

    async def start(self) -> None:
        """Take the "before" snapshot (call before the graph starts).

        It walks and hashes the thread's files, so it runs off the loop with a
        deadline; a snapshot that does not finish leaves the run without a
        change summary rather than stalling it.  A thread made by this run's
        start (``new_thread``) has empty folders that nothing has run in yet:
        its "before" is the empty snapshot, with no walk.
        """
        if self.new_thread:
            self._before = Snapshot({})
            return
        try:
            self._before = await OFFLOADER.arun(
                take_snapshot, self.paths, limits=self.limits, key=str(self.paths.root),
                what="the workspace snapshot", deadline=SNAPSHOT_DEADLINE_S,
            )
        except ToolFailure as exc:
            logger.warning("no change summary for %s: %s", self.paths.root, exc.message)

    async def asettle(self, projector: Projector) -> Settlement:
        """:meth:`settle` off the event loop, with the same deadline as :meth:`start`."""
        try:
            return await OFFLOADER.arun(
                self.settle, projector, key=str(self.paths.root),
                what="the change summary", deadline=SNAPSHOT_DEADLINE_S,
            )
        except ToolFailure as exc:
            logger.warning("no change summary for %s: %s", self.paths.root, exc.message)
            return Settlement()

    def settle(self, projector: Projector) -> Settlement:
        """Diff against the "before" snapshot; build the ``workspace_changes`` and notice events.

        Returns an empty settlement when the run ended before :meth:`start` completed.
        """
        if self._before is None:
            return Settlement()
        after = take_snapshot(self.paths, previous=self._before, limits=self.limits)
        changes = diff_snapshots(self._before, after, limits=self.limits)
        receipt = build_receipt(changes, projector.artifacts)
        events = [projector.make(ev.WorkspaceChanges, changes=changes.to_dict())]
        text = receipt_notice(receipt)
        if text is not None:
            events.append(projector.make(ev.Notice, kind=receipt.status, text=text, data=receipt.to_dict()))
        return Settlement(changes, receipt, events)
