"""Five-field cron expressions, evaluated in a time zone.

``minute hour day-of-month month day-of-week`` with ``*``, lists (``1,15``),
ranges (``1-5``), steps (``*/15``, ``10-50/20``), month and day names
(``jan``, ``mon-fri``), ``0`` or ``7`` for Sunday, and the macros ``@hourly``,
``@daily`` (``@midnight``), ``@weekly``, ``@monthly``, ``@yearly``
(``@annually``).  As in Vixie cron, when both day fields are restricted a day
matches if *either* does.

Times are wall-clock times in the schedule's zone (``zoneinfo``).  A wall time
skipped by a DST jump is normalised forward by the zone; a repeated one fires
once (the first occurrence).  Small and dependency-free on purpose: the
scheduler only ever asks "what is the next slot after this instant?".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from deerflow.errors import UserError

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))
_HORIZON_DAYS = 366 * 5  # "Feb 30" never comes: give up instead of looping forever


class CronError(UserError):
    """An expression or time zone that cannot be used; the message names the field."""


@dataclass(frozen=True)
class CronExpression:
    """A parsed expression; :meth:`next_after` gives its next slot."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        """Parse ``text``.

        Raises:
            CronError: wrong number of fields, or a value out of range (named).
        """
        expanded = MACROS.get(text.strip().lower(), text.strip())
        parts = expanded.split()
        if len(parts) != 5:
            raise CronError(f"invalid cron expression {text!r}: expected 5 fields "
                            "(minute hour day-of-month month day-of-week) or a macro like @daily")
        sets = [_parse_field(part, *spec, text=text) for part, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(text.strip(), sets[0], sets[1], sets[2], sets[3], weekdays,
                   any_day=parts[2] == "*", any_weekday=parts[4] == "*")

    def _day_matches(self, day: dt.date) -> bool:
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def next_after(self, instant: dt.datetime, tz: dt.tzinfo = dt.UTC) -> dt.datetime:
        """The first slot strictly after ``instant`` (aware), as an aware datetime in ``tz``.

        Raises:
            CronError: the expression never matches (``0 0 30 2 *``).
        """
        local = instant.astimezone(tz).replace(second=0, microsecond=0, tzinfo=None) + dt.timedelta(minutes=1)
        limit = local + dt.timedelta(days=_HORIZON_DAYS)
        while local < limit:
            if local.month not in self.months:
                local = (local.replace(day=1, hour=0, minute=0) + dt.timedelta(days=32)).replace(day=1)
            elif not self._day_matches(local.date()):
                local = local.replace(hour=0, minute=0) + dt.timedelta(days=1)
            elif local.hour not in self.hours:
                local = local.replace(minute=0) + dt.timedelta(hours=1)
            elif local.minute not in self.minutes:
                local += dt.timedelta(minutes=1)
            else:
                slot = local.replace(tzinfo=tz)
                if slot.astimezone(dt.UTC) > instant.astimezone(dt.UTC):
                    return slot
                local += dt.timedelta(minutes=1)
        raise CronError(f"cron expression {self.text!r} never matches a real date")


def zone(name: str) -> dt.tzinfo:
    """The time zone called ``name`` (``UTC``, ``Europe/Paris``...).

    Raises:
        CronError: unknown zone name.
    """
    if name.upper() == "UTC":
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Paris' or 'UTC'") from None


def _parse_field(part: str, name: str, low: int, high: int, names: dict[str, int], *, text: str) -> frozenset[int]:
    values: set[int] = set()
    for item in part.lower().split(","):
        base, _, step_text = item.partition("/")
        step = _number(step_text, name, text, names={}) if step_text else 1
        if step < 1:
            raise CronError(f"invalid cron expression {text!r}: {name} step must be at least 1")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _number(first, name, text, names), _number(last, name, text, names)
        else:
            start = _number(base, name, text, names)
            end = high if step_text else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise CronError(f"invalid cron expression {text!r}: {name} {item!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _number(token: str, name: str, text: str, names: dict[str, int]) -> int:
    if token in names:
        return names[token]
    if not token.isdigit():
        raise CronError(f"invalid cron expression {text!r}: {name} value {token!r} is not a number")
    return int(token)


__all__ = ["MACROS", "CronError", "CronExpression", "zone"]
