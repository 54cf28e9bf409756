"""The differential harness: the real pinned helm-unittest and pytest-helm-unittest on the same charts, the
same suites and the same collection pattern, compared case by case.

A case is (suite name, test name, n-th occurrence): helm-unittest's JUnit report names no suite file, so
repeated names are told apart by their order. Both the verdict and, for a failed case, the assertions
that failed (index, `not`, kind) must agree. Each tool runs on its own mirror of the checkout
(unittest_reference.mirror_chart), so snapshot files either writes never reach the other or the checkout.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier import paths
from kvtier.errors import UserError
from kvtier.unittest_reference import isolated_pytest, junit_cases, mirror_chart

DEFAULT_PATTERN = "tests/*_test.yaml"


@dataclass(frozen=True)
class Collection:
    """Which suites both tools run: helm-unittest's `-f` patterns and `--with-subchart`."""

    patterns: tuple[str, ...] = ()
    with_subchart: bool = True

    def real_args(self) -> list[str]:
        args = [a for p in self.patterns or (DEFAULT_PATTERN,) for a in ("-f", p)]
        return args if self.with_subchart else [*args, "--with-subchart=false"]

    def plugin_args(self) -> list[str]:
        args = [a for p in self.patterns or (DEFAULT_PATTERN,) for a in ("--helm-unittest-pattern", p)]
        return args if self.with_subchart else [*args, "--helm-unittest-no-subchart"]


CaseKey = tuple[str, str, int]
_SKIPPED = "skipped as 'documentSelector.skipEmptyTemplates: true'"  # an assertion's skip reason
_ASSERT = re.compile(r"^- asserts\[(\d+)\] (NOT )?`(\w+)` fail$")


@dataclass(frozen=True)
class Verdict:
    outcome: str  # passed | failed | skipped
    failed_asserts: tuple[tuple[int, bool, str], ...] = ()

    def show(self) -> str:
        if not self.failed_asserts:
            return self.outcome
        names = ", ".join(f"asserts[{i}]{' not' if n else ''} {k}" for i, n, k in self.failed_asserts)
        return f"{self.outcome} ({names})"


@dataclass
class ChartComparison:
    chart: Path
    real: dict[CaseKey, Verdict] = field(default_factory=dict)
    plugin: dict[CaseKey, Verdict] = field(default_factory=dict)

    @property
    def differences(self) -> dict[CaseKey, tuple[Verdict | None, Verdict | None]]:
        keys = sorted(self.real.keys() | self.plugin.keys())
        pairs = {k: (self.real.get(k), self.plugin.get(k)) for k in keys}
        return {k: pair for k, pair in pairs.items() if pair[0] != pair[1]}


def _keyed(rows: list[tuple[str, str, Verdict]]) -> dict[CaseKey, Verdict]:
    seen: Counter[tuple[str, str]] = Counter()
    out = {}
    for suite, it, verdict in rows:
        seen[(suite, it)] += 1
        out[(suite, it, seen[(suite, it)])] = verdict
    return out


def junit_failed_asserts(text: str) -> tuple[tuple[int, bool, str], ...]:
    """The failed assertions of one JUnit failure text. helm-unittest lists a header `- asserts[i] ...
    fail` for every assertion of a failed case; only the failed ones are followed by their details
    (a skipped one by its skip reason)."""
    parts = [p.strip() for p in text.split(" , ")]
    failed = []
    for index, part in enumerate(parts):
        match = _ASSERT.match(part.strip(" ,"))
        if not match:
            continue
        following = parts[index + 1].strip(" ,") if index + 1 < len(parts) else ""
        if following and not _ASSERT.match(following) and not following.startswith(_SKIPPED):
            failed.append((int(match[1]), bool(match[2]), match[3]))
    return tuple(failed)


def real_verdicts(chart: Path, collection: Collection, workdir: Path) -> dict[CaseKey, Verdict]:
    binary = paths.TOOLS_BIN / "helm-unittest"
    if not binary.exists():
        raise UserError(f"the real helm-unittest is not built at {binary}; run `make tools`")
    report = workdir / "helm-unittest.xml"
    subprocess.run(
        [str(binary), *collection.real_args(), "-t", "JUnit", "-o", str(report), str(chart)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if not report.is_file():
        raise UserError(f"helm-unittest wrote no report for {chart}")
    return _keyed(
        [
            (suite, test, Verdict(verdict, junit_failed_asserts(text)))
            for suite, test, verdict, text in junit_cases(report)
        ]
    )


def plugin_verdicts(
    chart: Path, collection: Collection, workdir: Path, *extra: str
) -> dict[CaseKey, Verdict]:
    report = workdir / "plugin.json"
    cmd, env = isolated_pytest(chart)
    cmd += ["-q", "--helm-unittest-root", str(chart), *collection.plugin_args()]
    cmd += ["--helm-unittest-report", str(report), *extra, str(chart)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=chart, env=env, timeout=900, check=False)
    if not report.is_file():
        output = done.stdout[-2000:] + done.stderr[-2000:]
        raise UserError(f"the plugin wrote no report for {chart}:\n{output}")
    rows: list[dict[str, Any]] = json.loads(report.read_text())
    return _keyed(
        [
            (
                r["suite"],
                r["it"],
                Verdict(r["outcome"], tuple((a["index"], a["not"], a["kind"]) for a in r["failed_asserts"])),
            )
            for r in rows
        ]
    )


def compare(
    chart: Path, workdir: Path, collection: Collection = Collection(), *extra: str
) -> ChartComparison:
    """Both tools on `chart` (a directory inside the checkout, or anywhere: it is mirrored first)."""
    chart = chart.resolve()
    if not (chart / "Chart.yaml").is_file():
        raise UserError(f"{chart} is not a chart (no Chart.yaml)")
    root = paths.ROOT if paths.ROOT in chart.parents else chart.parent
    real_copy = mirror_chart(chart, workdir / "real", root)
    plugin_copy = mirror_chart(chart, workdir / "plugin", root)
    return ChartComparison(
        chart,
        real_verdicts(real_copy, collection, workdir),
        plugin_verdicts(plugin_copy, collection, workdir, *extra),
    )
