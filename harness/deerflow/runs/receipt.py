"""The delivery receipt: did the outputs this run made reach the user?

A run can write a report to ``/mnt/user-data/outputs`` and end without ever
presenting it; the user then sees a successful run and no deliverable.  The
receipt compares the outputs the run *produced* (created or modified under
outputs, per the change summary; ``.tool-results`` excluded, it is process
feedback) with the paths the run *presented* (its own ``present_files`` calls,
not the thread's older artifacts):

* ``delivered`` — every produced output was presented;
* ``partial`` — some were;
* ``undelivered`` — outputs were produced and none was presented;
* ``nothing_produced`` — the run made no outputs (presenting old files or not).

Presenting an unrelated pre-existing file satisfies nothing.  The receipt does
not judge quality, only that what was made is connected to what was shown.
It leaves the run's execution status alone: an undelivered run still
``succeeded`` at running, and is marked by its receipt and a ``notice``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from deerflow.sandbox.files.changes import TOOL_RESULTS, ChangeSummary
from deerflow.sandbox.files.virtual_paths import OUTPUTS

ReceiptStatus = Literal["delivered", "partial", "undelivered", "nothing_produced"]


@dataclass(frozen=True)
class DeliveryReceipt:
    """Produced versus presented outputs of one run.

    Attributes:
        status: See the module docstring.
        produced: Output paths the run created or modified.
        presented: Paths the run presented (whether or not it produced them).
        unpresented: Produced paths that were never presented.
    """

    status: ReceiptStatus
    produced: tuple[str, ...]
    presented: tuple[str, ...]
    unpresented: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "produced": list(self.produced), "presented": list(self.presented),
                "unpresented": list(self.unpresented)}


def produced_outputs(changes: ChangeSummary) -> list[str]:
    """Outputs the run created or modified, internal tool results excluded."""
    return [p for p in changes.changed_under(OUTPUTS) if not PurePosixPath(p).is_relative_to(TOOL_RESULTS)]


def build_receipt(changes: ChangeSummary, presented: Iterable[str]) -> DeliveryReceipt:
    """The receipt of a run from its change summary and its own presentations."""
    produced = produced_outputs(changes)
    shown = list(dict.fromkeys(presented))
    shown_set = set(shown)
    missing = [p for p in produced if p not in shown_set]
    status: ReceiptStatus
    if not produced:
        status = "nothing_produced"
    elif not missing:
        status = "delivered"
    elif len(missing) < len(produced):
        status = "partial"
    else:
        status = "undelivered"
    return DeliveryReceipt(status, tuple(produced), tuple(shown), tuple(missing))


def receipt_notice(receipt: DeliveryReceipt) -> str | None:
    """What to tell the user about an incomplete delivery (``None`` when there is nothing to say)."""
    if receipt.status not in ("undelivered", "partial"):
        return None
    count = len(receipt.unpresented)
    files = ", ".join(receipt.unpresented)
    if receipt.status == "undelivered":
        return f"this run wrote {count} output file(s) but presented none of them: {files}"
    return f"this run wrote {len(receipt.produced)} output file(s) but did not present {count}: {files}"
