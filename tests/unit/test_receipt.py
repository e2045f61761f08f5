"""Delivery receipts: produced outputs versus what the run presented."""

from __future__ import annotations

import pytest

from deerflow.runs.receipt import build_receipt, receipt_notice
from deerflow.sandbox.files.changes import ChangeSummary, FileChange

OUT = "/mnt/user-data/outputs"


def changes(*created: str, modified: tuple[str, ...] = (), deleted: tuple[str, ...] = ()) -> ChangeSummary:
    return ChangeSummary(
        created=tuple(FileChange(p, "created", "text", 1, None) for p in created),
        modified=tuple(FileChange(p, "modified", "text", 2, 1) for p in modified),
        deleted=tuple(FileChange(p, "deleted", "text", None, 1) for p in deleted),
    )


@pytest.mark.parametrize(
    ("summary", "presented", "status", "unpresented"),
    [
        (changes(f"{OUT}/a.md"), [f"{OUT}/a.md"], "delivered", []),
        (changes(f"{OUT}/a.md", modified=(f"{OUT}/b.csv",)), [f"{OUT}/a.md"], "partial", [f"{OUT}/b.csv"]),
        (changes(f"{OUT}/a.md"), [], "undelivered", [f"{OUT}/a.md"]),
        (changes(), [], "nothing_produced", []),
    ],
)
def test_status(summary, presented, status, unpresented) -> None:
    receipt = build_receipt(summary, presented)
    assert receipt.status == status
    assert list(receipt.unpresented) == unpresented


def test_presenting_an_unrelated_existing_file_does_not_deliver() -> None:
    receipt = build_receipt(changes(f"{OUT}/new.md"), [f"{OUT}/old-report.md"])
    assert receipt.status == "undelivered"
    assert receipt.to_dict() == {"status": "undelivered", "produced": [f"{OUT}/new.md"],
                                 "presented": [f"{OUT}/old-report.md"], "unpresented": [f"{OUT}/new.md"]}


def test_workspace_files_deletions_and_tool_results_are_not_outputs() -> None:
    summary = changes("/mnt/user-data/workspace/scratch.py", f"{OUT}/.tool-results/grep-call_1.txt",
                      deleted=(f"{OUT}/gone.md",))
    receipt = build_receipt(summary, [])
    assert receipt.status == "nothing_produced" and receipt.produced == ()
    assert receipt_notice(receipt) is None


def test_notice_names_the_unpresented_files() -> None:
    undelivered = build_receipt(changes(f"{OUT}/a.md"), [])
    assert receipt_notice(undelivered) == f"this run wrote 1 output file(s) but presented none of them: {OUT}/a.md"
    partial = build_receipt(changes(f"{OUT}/a.md", f"{OUT}/b.md"), [f"{OUT}/a.md"])
    assert f"did not present 1: {OUT}/b.md" in (receipt_notice(partial) or "")
    assert receipt_notice(build_receipt(changes(f"{OUT}/a.md"), [f"{OUT}/a.md"])) is None
