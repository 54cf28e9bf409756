"""No helm-unittest suite or test case of this repository's charts declares `skip:`. helm-unittest and the
pytest plugin count a skipped case as a pass of the run, so a `skip:` would hide the case under CI too."""

from __future__ import annotations

import yaml

from kvtier import paths


def test_no_chart_suite_or_case_declares_skip() -> None:
    suites = sorted(paths.CHARTS.glob("*/tests/*_test.yaml"))
    assert suites, f"no helm-unittest suites under {paths.CHARTS}/*/tests"
    skipped = []
    for suite in suites:
        for doc in yaml.safe_load_all(suite.read_text()):
            if not isinstance(doc, dict):
                continue
            where = suite.relative_to(paths.ROOT)
            if "skip" in doc:
                skipped.append(f"{where}: the whole suite")
            skipped += [f"{where}: {case.get('it')!r}" for case in doc.get("tests") or [] if "skip" in case]
    assert not skipped, "remove the skip (fix the case, or delete it): " + "; ".join(skipped)
