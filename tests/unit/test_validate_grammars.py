"""The grammars the rules judge with (cron schedules, quantities, label keys and values), on the cases that
surprise people. tests/cluster/test_validate_judges.py compares them with the real API server."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kvtier import quantity
from kvtier.validate.checks import cron, metadata_rules


@pytest.mark.parametrize(
    "schedule",
    [
        "*/5 * * * *",
        "0 0 * * 0",
        "0 0 ? JAN Mon",
        "5/10 * * * *",
        "*-5 * * * *",
        "@hourly",
        "@every 1h30m",
        "0 0 1,15 * sun-sat",
        "  0 0 * * *",
        "+5 * * * *",
        "@every 0",
    ],
)
def test_schedules_kubernetes_accepts(schedule: str) -> None:
    assert cron.schedule_error(schedule) is None


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("0 0 * * 7", "day of week field '7': 7 is above the maximum 6"),
        ("60 * * * *", "minute field '60': 60 is above the maximum 59"),
        ("0 0 * *", "expected 5 fields"),
        ("0 0 * * * *", "expected 5 fields"),
        ("5-1 * * * *", "the range starts after it ends"),
        ("*/0 * * * *", "the step must be a positive number"),
        ("0 0 0 * *", "day of month field '0': 0 is below the minimum 1"),
        ("1,2,x * * * *", "minute field 'x' (of '1,2,x'): 'x' is not a number"),
        ("@every 1 h", "not a duration"),
        ("@fortnightly", "unknown descriptor"),
        (" @hourly", "expected 5 fields"),
        ("TZ=UTC 0 0 * * *", "timeZone field"),
        ("", "empty"),
    ],
)
def test_schedules_kubernetes_refuses(schedule: str, expected: str) -> None:
    error = cron.schedule_error(schedule)
    assert error is not None and expected in error


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("1Gi", 2**30),
        ("1G", 10**9),
        ("1e3", 1000),
        ("1.5Ki", 1536),
        (".5", Fraction(1, 2)),
        (8, 8),
        ("+2", 2),
        ("0.1", Fraction(1, 10)),
        ("100n", Fraction(1, 10**7)),
    ],
)
def test_quantities(text: object, value: Fraction) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize("text", ["1GB", "Gi", "1 Gi", "1.2.3", "", "1gi", True])
def test_not_quantities(text: object) -> None:
    assert quantity.try_parse(text) is None


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("team", True),
        ("example.com/tier", True),
        ("a b", False),
        ("-x", False),
        ("x" * 64, False),
        ("Example.com/x", False),
        ("a/b/c", False),
        ("k8s.io/", False),
        ("x" * 63, True),
    ],
)
def test_label_keys(key: str, ok: bool) -> None:
    assert (metadata_rules.key_error(key) is None) == ok


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("a.b-c_d", True), ("-a", False), ("y" * 64, False), ("a b", False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert (metadata_rules.value_error(value) is None) == ok
