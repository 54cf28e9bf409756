"""Working beside the real helm-unittest: a scratch mirror of the checkout, its JUnit verdicts, and the
plugin's (pytest-helm-unittest, tools/pytest-helm-unittest) own run in a pytest that inherits nothing.

Shared by the comparison test, the corpus recorder, the plugin's tests and the benchmark, so all run
both tools on the same layout and in the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from kvtier import paths

_ASSERTION = re.compile(r"(?:^|,)\s*- asserts\[\d+\] (?:NOT )?`")  # an assertion header in JUnit text


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


def junit_cases(report: Path) -> list[tuple[str, str, str, str]]:
    """(suite, test, passed|failed|skipped, failure text) for every test case of helm-unittest's JUnit
    report; the text is empty unless the case failed.

    A case whose assertions were all skipped by `documentSelector.skipEmptyTemplates` is `<skipped>` in
    the JUnit report, but helm-unittest counts it passed (summary line, exit code, console): its skip
    message lists the assertions it ran, where a `skip:` case lists none. It reads as passed here."""
    rows = []
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            verdict, text = "passed", ""
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            if failure is not None:
                verdict, text = "failed", failure.text or ""
            skipped = case.find("skipped")
            if skipped is not None and not _assertions_ran(skipped.get("message", ""), case.get("name", "")):
                verdict, text = "skipped", ""
            rows.append((suite.get("name", ""), case.get("name", ""), verdict, text))
    return rows


def _assertions_ran(message: str, name: str) -> bool:
    """Whether a JUnit skip message lists, after `SKIPPED '<name>' ` (and any render error), the
    assertions the case ran."""
    rest = message.removeprefix(f"SKIPPED '{name.replace(chr(9), '')}' ")
    return rest != message and _ASSERTION.search(rest) is not None


def junit_verdicts(report: Path) -> list[tuple[str, str, str]]:
    """(suite, test, passed|failed|skipped) for every test case of helm-unittest's JUnit report."""
    return [(suite, test, verdict) for suite, test, verdict, _text in junit_cases(report)]


def isolated_pytest(rootdir: Path | str) -> tuple[list[str], dict[str, str]]:
    """A pytest command (add arguments to it) and its environment that see only what they are given:
    no ini file, no cache, none of the caller's PYTEST_ADDOPTS or PYTEST_PLUGINS."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    command = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(rootdir)]
    # No ini file, so the plugin is told which Helm to render with: the pinned one.
    return [*command, "-p", "no:cacheprovider", "--helm-unittest-helm", str(paths.TOOLS_BIN / "helm3")], env
