"""Snapshot files in helm-unittest's format: `<suite dir>/__snapshot__/<suite file>.snap`.

A YAML map: test name -> {assertion counter (1-based, per test): snapshot text}, where the text is
the value written by yaml.v3 (goemit). New snapshots pass and are stored; `update` rewrites them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_helm_unittest import goemit, govalues


@dataclass
class SnapshotResult:
    passed: bool
    index: int
    cached: str
    new: str
    message: str = ""


@dataclass
class SnapshotFile:
    path: Path
    update: bool
    cached: dict[str, dict[int, str]] = field(default_factory=dict)
    current: dict[str, dict[int, str]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def for_suite(cls, suite_file: Path, snapshot_id: str, update: bool) -> SnapshotFile:
        name = suite_file.name + (f"_{snapshot_id}" if snapshot_id else "") + ".snap"
        snap = cls(path=suite_file.parent / "__snapshot__" / name, update=update)
        if snap.path.is_file():
            loaded = govalues.load(snap.path.read_text()) or {}
            snap.cached = {str(k): {int(i): str(t) for i, t in (v or {}).items()} for k, v in loaded.items()}
        return snap

    def compare(
        self, test: str, index: int, content: Any, match: str = "", not_match: str = ""
    ) -> SnapshotResult:
        new = goemit.trusted_dump(content)
        cached = self.cached.get(test, {}).get(index)
        passed, message = True, ""
        if match or not_match:
            if match and not re.search(match.strip(), new):
                passed, message = False, f" pattern '{match.strip()}' not found in snapshot"
            if not_match and passed and re.search(not_match.strip(), new):
                passed, message = False, f" pattern '{not_match.strip()}' should not be in snapshot"
        elif cached is not None and cached != new:
            passed = False
        if cached is None or self.update:
            self.changed = self.changed or cached != new
        self.current.setdefault(test, {})[index] = new if (self.update or cached is None) else cached
        return SnapshotResult(self.update or passed, index, cached or "", new, message)

    def store(self, complete: bool) -> None:
        """Write the file if something was added or updated (and drop vanished entries after a full run)."""
        vanished = complete and any(
            i not in self.current.get(t, {}) for t, entries in self.cached.items() for i in entries
        )
        if not (self.changed or vanished):
            return
        merged = {} if complete else {t: dict(e) for t, e in self.cached.items()}
        for test, entries in self.current.items():
            merged.setdefault(test, {}).update(entries)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(goemit.dump(merged))
