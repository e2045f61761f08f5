"""Cron expressions: the next slot, time zones, errors that name the field; lease claims in SQLite."""

from __future__ import annotations

import datetime as dt
import threading
import time
from zoneinfo import ZoneInfo

import pytest

from deerflow.scheduling.cron import CronError, CronExpression, zone
from deerflow.scheduling.runner import count_missed
from deerflow.scheduling.store import ScheduleStore

UTC = dt.UTC


def at(*parts: int, tz: dt.tzinfo = UTC) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=tz)


@pytest.mark.parametrize(("expr", "after", "expected"), [
    ("*/15 * * * *", at(2026, 3, 2, 10, 7), at(2026, 3, 2, 10, 15)),
    ("*/15 * * * *", at(2026, 3, 2, 10, 15), at(2026, 3, 2, 10, 30)),  # strictly after
    ("0 9 * * mon-fri", at(2026, 3, 6, 18, 0), at(2026, 3, 9, 9, 0)),  # Friday evening -> Monday
    ("30 23 31 * *", at(2026, 4, 1, 0, 0), at(2026, 5, 31, 23, 30)),  # April has no 31st
    ("0 0 29 2 *", at(2026, 3, 1), at(2028, 2, 29, 0, 0)),  # next leap day
    ("0 12 13 * fri", at(2026, 3, 1), at(2026, 3, 6, 12, 0)),  # day-of-month OR day-of-week
    ("@hourly", at(2026, 3, 2, 10, 59, 30), at(2026, 3, 2, 11, 0)),
    ("0 0 * * 7", at(2026, 3, 2), at(2026, 3, 8, 0, 0)),  # 7 is Sunday too
    ("5-10/5 1,2 * jan *", at(2026, 1, 1, 1, 5), at(2026, 1, 1, 1, 10)),
])
def test_next_slot(expr, after, expected):
    assert CronExpression.parse(expr).next_after(after) == expected


def test_slots_are_wall_clock_times_in_the_schedules_zone():
    paris = ZoneInfo("Europe/Paris")
    slot = CronExpression.parse("0 9 * * *").next_after(at(2026, 3, 28, 12, 0), paris)
    assert slot == at(2026, 3, 29, 9, 0, tz=paris)
    assert slot.astimezone(UTC).hour == 7  # summer time started that night
    assert CronExpression.parse("0 9 * * *").next_after(at(2026, 3, 27, 12, 0), paris).astimezone(UTC).hour == 8


@pytest.mark.parametrize(("expr", "message"), [
    ("* * * *", "expected 5 fields"),
    ("60 * * * *", "minute '60' is outside 0-59"),
    ("* * * * funday", "day of week value 'funday' is not a number"),
    ("*/0 * * * *", "step must be at least 1"),
    ("5-1 * * * *", "outside"),
])
def test_bad_expressions_name_the_field(expr, message):
    with pytest.raises(CronError, match=message):
        CronExpression.parse(expr)


def test_impossible_dates_and_zones_are_errors():
    with pytest.raises(CronError, match="never matches"):
        CronExpression.parse("0 0 30 2 *").next_after(at(2026, 1, 1))
    with pytest.raises(CronError, match="unknown time zone"):
        zone("Mars/Olympus")


def test_missed_slots_are_counted_not_replayed():
    hourly = CronExpression.parse("0 * * * *")
    slot = at(2026, 3, 2, 10, 0).timestamp()
    assert count_missed(hourly, UTC, slot, at(2026, 3, 2, 13, 30).timestamp()) == 3
    assert count_missed(hourly, UTC, slot, at(2026, 3, 2, 10, 30).timestamp()) == 0


def test_only_one_of_many_concurrent_claimers_wins(tmp_path):
    db = tmp_path / "deerflow.db"
    schedule = ScheduleStore(db).add(user_id="alice", cron="* * * * *", timezone="UTC", prompt="p",
                                     agent_name=None, thread_id=None, next_run_at=time.time() - 60)
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def claim(owner: str) -> None:
        store = ScheduleStore(db)  # its own connection, like another server
        barrier.wait()
        if store.claim(schedule.schedule_id, owner, now=time.time(), lease_seconds=300):
            wins.append(owner)

    threads = [threading.Thread(target=claim, args=(f"server-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    store = ScheduleStore(db)
    assert store.due(time.time()) == []  # held: due for nobody else
    assert not store.claim(schedule.schedule_id, "late", now=time.time(), lease_seconds=300, force=True)
    assert store.claim(schedule.schedule_id, "late", now=time.time() + 301, lease_seconds=300)  # lease expired
