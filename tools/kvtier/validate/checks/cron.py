"""CronJob schedules, judged as the API server judges them.

Kubernetes validates `spec.schedule` with robfig/cron v3's ParseStandard (five fields: minute, hour, day of
month, month, day of week; or a descriptor such as @hourly or "@every 1h30m") and refuses a TZ= or
CRON_TZ= prefix (the timeZone field replaces it). The grammar below follows that parser, including what
surprises people: day of week is 0-6 (7 is refused), `?` means `*` in any field, `N/step` runs from N to
the field's maximum, and month and day names are three letters, in any case.
"""

from __future__ import annotations

import re

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (  # name, minimum, maximum, names
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    (
        "month",
        1,
        12,
        {m: i for i, m in enumerate(_MONTHS, 1)},
    ),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
# Go's time.ParseDuration: a sequence of decimal numbers with units, optionally signed; "0" alone too.
_DURATION = re.compile(r"^[+-]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$")
_ATOI = re.compile(r"^[+-]?[0-9]+$")  # Go's strconv.Atoi


def schedule_error(schedule: str) -> str | None:
    """None when Kubernetes accepts the schedule, else what is wrong with it."""
    if "TZ" in schedule:
        return "a time zone in the schedule (TZ= or CRON_TZ=) is refused: use the CronJob's timeZone field"
    if not schedule:
        return "the schedule is empty"
    if schedule.startswith("@"):
        return _descriptor_error(schedule)
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}"
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in text.split(","):
            error = _range_error(part, low, high, names)
            if error:
                where = repr(part) if part == text else f"{part!r} (of {text!r})"
                return f"{name} field {where}: {error}"
    return None


def _descriptor_error(schedule: str) -> str | None:
    if schedule in _DESCRIPTORS:
        return None
    if schedule.startswith("@every "):
        duration = schedule[len("@every ") :]
        return None if _DURATION.match(duration) else f"@every {duration!r}: not a duration such as 1h30m"
    return f"unknown descriptor {schedule!r} (known: {', '.join(sorted(_DESCRIPTORS))}, @every <duration>)"


def _range_error(part: str, low: int, high: int, names: dict[str, int]) -> str | None:
    range_and_step = part.split("/")
    bounds = range_and_step[0].split("-")
    if len(range_and_step) > 2:
        return "too many slashes"
    if bounds[0] in ("*", "?"):
        start, end = low, high  # the parser ignores anything after "*-"
    else:
        if len(bounds) > 2:
            return "too many hyphens"
        try:
            start = _number(bounds[0], names)
            end = _number(bounds[1], names) if len(bounds) == 2 else start
        except ValueError as error:
            return str(error)
    if len(range_and_step) == 2:
        try:
            step = _number(range_and_step[1], {})
        except ValueError as error:
            return str(error)
        if step <= 0:
            return "the step must be a positive number"
        if len(bounds) == 1 and bounds[0] not in ("*", "?"):
            end = high  # "N/step" means N to the maximum
    if start < low:
        return f"{start} is below the minimum {low}"
    if end > high:
        return f"{end} is above the maximum {high}"
    if start > end:
        return "the range starts after it ends"
    return None


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not _ATOI.match(text):
        raise ValueError(f"{text!r} is not a number" + (" or a name" if names else ""))
    number = int(text)
    if number < 0:
        raise ValueError(f"{text!r}: negative numbers are not allowed")
    return number


__all__ = ["schedule_error"]
