"""The rule catalogue: `kvtier validate --list-rules` and docs/validate.md come from the registry."""

from __future__ import annotations

import json
import subprocess
import sys

from kvtier import paths
from kvtier.generate import derived
from kvtier.validate import catalogue, rules


def test_list_rules_prints_every_registered_rule_with_why_and_fix() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kvtier.cli", "validate", "--list-rules", "--output", "json"],
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    listed = {r["id"]: r for r in json.loads(run.stdout)}
    assert set(listed) == set(catalogue.all_rules())
    scopes = ("values", "manifests", "chart")
    assert all(r["reason"] and r["remedy"] and r["scope"] in scopes for r in listed.values())


def test_docs_catalogue_has_a_row_per_rule() -> None:
    text = (paths.ROOT / "docs" / "validate.md").read_text()
    section = text.partition(derived.RULES_BEGIN)[2].partition(derived.RULES_END)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert sorted(row.split("`")[1] for row in rows) == sorted(catalogue.all_rules())


def test_a_pipe_in_a_reason_cannot_break_the_table(monkeypatch) -> None:
    rule = next(iter(catalogue.all_rules().values()))
    monkeypatch.setitem(
        rules.REGISTRY, rule.id, rules.Rule(rule.id, "a | b", "c", rule.scope, rule.check, rule.check_name)
    )
    row = next(line for line in catalogue.markdown().splitlines() if f"`{rule.id}`" in line)
    assert row.count(" | ") == 4 and "a \\| b" in row
