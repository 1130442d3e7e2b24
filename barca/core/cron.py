"""Cron expressions for ``Schedule("<cron>")``: checked when a pipeline file is read, and the
next time one fires. Five fields (minute hour day-of-month month day-of-week) or six (seconds
first); each ``*``, a number, a range ``a-b``, a step ``*/n`` or ``a-b/n``, or a list of those;
month and weekday names (``JAN``, ``MON``); weekday 0 or 7 is Sunday; ``@daily`` and friends."""
from __future__ import annotations

import calendar
import datetime as dt

_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@hourly": "0 * * * *"}
_MONTHS = {m.upper(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
# (name, lowest, highest, names)
_FIELDS = [("second", 0, 59, {}), ("minute", 0, 59, {}), ("hour", 0, 23, {}),
           ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS)]


class CronError(ValueError):
    """Why a cron expression cannot be read (the message says which field)."""


class Cron:
    """A parsed expression: the set of values each field allows."""
    __slots__ = ("text", "seconds", "minutes", "hours", "days", "months", "weekdays",
                 "any_day", "any_weekday")

    def __init__(self, text: str) -> None:
        self.text = text
        parts = _MACROS.get(text.strip().lower(), text).split()
        if len(parts) == 5:
            parts = ["0", *parts]
        elif len(parts) != 6:
            raise CronError(f"a cron has 5 fields (minute hour day month weekday) or 6 "
                            f"(seconds first), not {len(parts)}")
        sets = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
        self.seconds, self.minutes, self.hours, self.days, self.months, wd = sets
        self.weekdays = {d % 7 for d in wd}
        self.any_day, self.any_weekday = parts[3] in ("*", "?"), parts[5] in ("*", "?")

    def _day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:  # cron's rule: both restricted -> either matches
            return dom and dow
        return dom or dow

    def next_fire(self, after: dt.datetime) -> dt.datetime | None:
        """The first time strictly after ``after`` (naive, UTC) the expression matches; None if
        none within eight years (``0 0 30 2 *``: February 30th)."""
        start = after.replace(microsecond=0) + dt.timedelta(seconds=1)
        day = start.date()
        for _ in range(366 * 8):
            if self._day_matches(day):
                first = start.time() if day == start.date() else dt.time(0, 0, 0)
                for h in sorted(self.hours):
                    if h < first.hour:
                        continue
                    for m in sorted(self.minutes):
                        if (h, m) < (first.hour, first.minute):
                            continue
                        for s in sorted(self.seconds):
                            if (h, m, s) >= (first.hour, first.minute, first.second):
                                return dt.datetime.combine(day, dt.time(h, m, s))
            day += dt.timedelta(days=1)
        return None


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    n = names.get(text.upper()) if names else None
    if n is None:
        if not text.isdigit():
            raise CronError(f"{text!r} is not a {name}")
        n = int(text)
    if not low <= n <= high:
        raise CronError(f"{name} {n} is out of range {low}-{high}")
    return n


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise CronError(f"{step_text!r} is not a step of the {name} field")
            step = int(step_text)
        if base in ("*", "?"):
            a, b = low, high
        elif "-" in base:
            x, _, y = base.partition("-")
            a, b = _value(x, name, low, high, names), _value(y, name, low, high, names)
            if a > b:
                raise CronError(f"the {name} range {base} runs backwards")
        else:
            a = _value(base, name, low, high, names)
            b = high if step_text else a
        out.update(range(a, b + 1, step))
    if not out:
        raise CronError(f"the {name} field is empty")
    return out


def parse(text: str) -> Cron:
    """The expression, or ``CronError`` saying what is wrong with it."""
    if not isinstance(text, str) or not text.strip():
        raise CronError("a cron expression is a non-empty string")
    return Cron(text)
