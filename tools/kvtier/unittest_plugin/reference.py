"""Working beside the real helm-unittest: a scratch mirror of the checkout and its JUnit verdicts.

Shared by the comparison test, the corpus recorder and the benchmark, so all three run the reference
tool on the same layout and read its verdicts the same way.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from kvtier import paths


def mirror_chart(chart: Path, dest: Path, root: Path = paths.ROOT) -> Path:
    """Copy `chart` to the same place under `dest` in a mirror of `root` whose other entries are
    symlinks, so suites that reach outside the chart (../../../values/x.yaml) still work and snapshot
    files the tools write never touch the checkout. Returns the copy."""
    src_dir, dst_dir = root, dest
    for part in chart.relative_to(root).parts:
        dst_dir.mkdir(parents=True, exist_ok=True)
        for entry in src_dir.iterdir():
            if entry.name not in (part, ".git") and not (dst_dir / entry.name).exists():
                (dst_dir / entry.name).symlink_to(entry)
        src_dir, dst_dir = src_dir / part, dst_dir / part
        if dst_dir.is_symlink():  # mirrored as a link for an earlier chart: now copied for real
            dst_dir.unlink()
    shutil.copytree(chart, dst_dir, symlinks=True)
    return dst_dir


def junit_verdicts(report: Path) -> list[tuple[str, str, str]]:
    """(suite, test, passed|failed|skipped) for every test case of helm-unittest's JUnit report."""
    rows = []
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            verdict = "passed"
            if case.find("failure") is not None or case.find("error") is not None:
                verdict = "failed"
            if case.find("skipped") is not None:
                verdict = "skipped"
            rows.append((suite.get("name", ""), case.get("name", ""), verdict))
    return rows
