"""Scheduled runs: cron expressions, leases in SQLite, unattended ``scheduled`` runs.

:mod:`~deerflow.scheduling.cron` parses and evaluates expressions,
:mod:`~deerflow.scheduling.store` keeps schedules, leases and run records,
:mod:`~deerflow.scheduling.book` validates a user's schedules and
:mod:`~deerflow.scheduling.runner` claims and runs the due ones.
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:
    from deerflow.scheduling.book import ScheduleBook
    from deerflow.scheduling.cron import CronError, CronExpression
    from deerflow.scheduling.runner import Scheduler
    from deerflow.scheduling.store import Schedule, ScheduleRun, ScheduleStore

# Imported on first use: importing the package (the CLI does) stays cheap.
_EXPORTS = {
    "ScheduleBook": "book",
    "CronError": "cron",
    "CronExpression": "cron",
    "Scheduler": "runner",
    "Schedule": "store",
    "ScheduleRun": "store",
    "ScheduleStore": "store",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["CronError", "CronExpression", "Schedule", "ScheduleBook", "ScheduleRun", "ScheduleStore", "Scheduler"]
