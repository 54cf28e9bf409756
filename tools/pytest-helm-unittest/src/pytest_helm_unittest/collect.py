"""Which suite files helm-unittest runs for a chart, and in what order.

The pinned helm-unittest joins each `-f` pattern to the chart directory and expands it with Go's
filepath.Glob, or with yargevad/filepathx when the pattern holds `**`. Then, with subcharts on (its
default), it does the same for every dependency Helm's loader finds in charts/: at
charts/<name from its Chart.yaml> (not the directory's own name, so a .tgz dependency has no suites),
skipping a dependency whose `condition`, or failing that whose `tags`, are false in the top chart's own
values.yaml. This module reproduces that selection; fnmatch would not (its `*` crosses `/`).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_helm_unittest import govalues

DEFAULT_PATTERN = "tests/*_test.yaml"


class PatternError(ValueError):
    """A pattern Go's filepath.Match rejects (ErrBadPattern)."""


@dataclass(frozen=True)
class PlannedFile:
    path: Path  # as helm-unittest opens it (maybe a directory, or missing: parsing then fails)
    chart_route: str  # e.g. "umbrella" or "umbrella/charts/curvine"
    top: bool  # a file of the top chart: a bad one fails the whole chart, not just its subtree


def go_clean(path: str) -> str:
    """Go's filepath.Clean on a POSIX path."""
    cleaned = posixpath.normpath(path) if path else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _match_regex(pattern: str) -> re.Pattern[str]:
    """Go's filepath.Match as a regex: `*` and `?` stop at `/`, `[^...]` negates, `\\` escapes."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\":
            if i + 1 >= len(pattern):
                raise PatternError(pattern)
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "[":
            end, body = _char_class(pattern, i + 1)
            out.append(body)
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _char_class(pattern: str, i: int) -> tuple[int, str]:
    """(index of the closing `]`, the class as a regex) for a class opened just before i."""
    negate = i < len(pattern) and pattern[i] == "^"
    i += negate
    ranges: list[str] = []
    while True:
        if i >= len(pattern):
            raise PatternError(pattern)
        if pattern[i] == "]" and ranges:
            break
        low, i = _class_char(pattern, i)
        high = low
        if i < len(pattern) and pattern[i] == "-":
            high, i = _class_char(pattern, i + 1)
        ranges.append(f"{re.escape(low)}-{re.escape(high)}")
    return i, f"[{'^' if negate else ''}{''.join(ranges)}]"


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    if i >= len(pattern) or pattern[i] in "-]":
        raise PatternError(pattern)
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise PatternError(pattern)
    return pattern[i], i + 1


def go_match(pattern: str, name: str) -> bool:
    return _match_regex(pattern).fullmatch(name) is not None


def _has_meta(path: str) -> bool:
    return any(c in path for c in "*?[\\")


def _lexists(path: str) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def go_glob(pattern: str) -> list[str]:
    """Go's filepath.Glob: sorted per directory, paths joined (cleaned) from the matched dirs."""
    _match_regex(pattern)  # a malformed pattern is an error even when nothing would match
    if not _has_meta(pattern):
        return [pattern] if _lexists(pattern) else []
    cut = pattern.rfind("/") + 1
    directory, name = pattern[:cut], pattern[cut:]
    directory = "." if not directory else directory if directory == "/" else directory[:-1]
    if not _has_meta(directory):
        return _glob_in(directory, name)
    if directory == pattern:
        raise PatternError(pattern)
    return [m for parent in go_glob(directory) for m in _glob_in(parent, name)]


def _glob_in(directory: str, name: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return []
    regex = _match_regex(name)
    return [go_clean(f"{directory}/{entry}") for entry in entries if regex.fullmatch(entry)]


def _walk(root: str) -> list[str]:
    """Go's filepath.Walk order: the root, then each entry depth-first by name; links not followed."""
    out = [root]
    try:
        is_dir = stat.S_ISDIR(os.lstat(root).st_mode)
    except OSError:
        return out
    if is_dir:
        for entry in sorted(os.listdir(root)):
            out += _walk(go_clean(f"{root}/{entry}"))
    return out


def filepathx_glob(pattern: str) -> list[str]:
    """yargevad/filepathx.Glob: `**` splits the pattern, and every hit of each part is walked whole,
    so `**` spans zero or more directories (and a trailing `**` yields directories too)."""
    if "**" not in pattern:
        return go_glob(pattern)
    matches = [""]
    for part in pattern.split("**"):
        hits: dict[str, None] = {}
        for match in matches:
            for path in go_glob(match + part):
                hits.update(dict.fromkeys(_walk(path)))
        matches = list(hits)
    return matches


def pattern_files(chart_path: str, patterns: list[str]) -> list[str]:
    """helm-unittest's GetFiles: each pattern (consecutive repeats dropped) in order, joined to the
    chart unless absolute or already holding the chart path; a file two patterns match comes twice."""
    base = chart_path + "/"
    files: list[str] = []
    for index, pattern in enumerate(patterns):
        if index and patterns[index - 1] == pattern:
            continue
        if pattern.startswith("/"):
            files.append(pattern)
            continue
        files += filepathx_glob(pattern if base in pattern else go_clean(base + pattern))
    return files


@dataclass
class _Chart:
    metadata: dict[str, Any]
    dependencies: list[_Chart]  # none for a .tgz: nothing under charts/<name> can lie inside it

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))


def _load(directory: Path) -> _Chart:
    return _Chart(_metadata((directory / "Chart.yaml").read_text()), _dependencies(directory / "charts"))


def _metadata(text: str) -> dict[str, Any]:
    loaded = govalues.load(text)
    return loaded if isinstance(loaded, dict) else {}


def _dependencies(charts_dir: Path) -> list[_Chart]:
    """What Helm's loader makes of charts/: each directory with a Chart.yaml and each .tgz, except
    names that start with `_` or `.` (Helm keeps them in a map: the real order across them is random)."""
    if not charts_dir.is_dir():
        return []
    found = []
    for entry in sorted(charts_dir.iterdir()):
        if entry.name.startswith(("_", ".")) or entry.suffix == ".prov":
            continue
        if entry.is_dir() and (entry / "Chart.yaml").is_file():
            found.append(_load(entry))
        elif entry.suffix == ".tgz" and entry.is_file():
            found.append(_archive(entry))
    return found


def _archive(path: Path) -> _Chart:
    try:
        with tarfile.open(path) as tar:
            member = next(
                m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")
            )
            handle = tar.extractfile(member)
            metadata = _metadata(handle.read().decode()) if handle else {}
    except (tarfile.TarError, StopIteration, OSError, UnicodeDecodeError):
        metadata = {}
    return _Chart(metadata, [])


def condition_holds(condition: str, values: dict[str, Any]) -> bool:
    """helm-unittest's own reading of `condition`: one dotted path (a comma list is not split), true
    unless it reaches a boolean false."""
    if not condition:
        return True
    current: Any = values
    parts = condition.split(".")
    for index, part in enumerate(parts):
        if not isinstance(current, dict) or part not in current:
            return True
        current = current[part]
        if index == len(parts) - 1:
            return current if isinstance(current, bool) else True
    return True


def tags_hold(tags: list[Any], values: dict[str, Any]) -> bool:
    """Any tag true enables; no tags, or no `tags` map in the values, enables."""
    table = values.get("tags")
    if not tags or not isinstance(table, dict):
        return True
    return any(table.get(tag) is True for tag in tags if isinstance(tag, str))


def _enabled(parent: _Chart, sub: _Chart, values: dict[str, Any]) -> bool:
    for dep in parent.metadata.get("dependencies") or []:
        if not isinstance(dep, dict) or (dep.get("alias") or dep.get("name")) != sub.name:
            continue
        if dep.get("condition"):
            return condition_holds(str(dep["condition"]), values)
        if dep.get("tags"):
            return tags_hold(list(dep["tags"]), values)
        return True
    return True


def suite_plan(chart_dir: Path, patterns: list[str], with_subchart: bool = True) -> list[PlannedFile]:
    """Every suite file helm-unittest opens for chart_dir, in its order (subcharts after their parent)."""
    top = _load(chart_dir)
    values_file = chart_dir / "values.yaml"
    loaded = govalues.load(values_file.read_text()) if values_file.is_file() else None
    values = loaded if isinstance(loaded, dict) else {}
    plan: list[PlannedFile] = []

    def visit(chart: _Chart, path: str, route: str) -> None:
        plan.extend(PlannedFile(Path(f), route, route == top.name) for f in pattern_files(path, patterns))
        if not with_subchart:
            return
        for sub in chart.dependencies:
            if _enabled(chart, sub, values):
                visit(sub, f"{path}/charts/{sub.name}", f"{route}/charts/{sub.name}")

    visit(top, str(chart_dir), top.name)
    return plan
