"""Scheduled runs: cron expressions, leases in SQLite, unattended ``scheduled`` runs.

:mod:`~deerflow.scheduling.cron` parses and evaluates expressions,
:mod:`~deerflow.scheduling.store` keeps schedules, leases and run records,
:mod:`~deerflow.scheduling.book` validates a user's schedules and
:mod:`~deerflow.scheduling.runner` claims and runs the due ones.
"""

from deerflow.scheduling.book import ScheduleBook
from deerflow.scheduling.cron import CronError, CronExpression
from deerflow.scheduling.runner import Scheduler
from deerflow.scheduling.store import Schedule, ScheduleRun, ScheduleStore

__all__ = ["CronError", "CronExpression", "Schedule", "ScheduleBook", "ScheduleRun", "ScheduleStore", "Scheduler"]
