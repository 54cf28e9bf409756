"""The policy scan chart registries and admission pipelines run: checkov (kubernetes framework, pinned in
toolchain/versions.env, in .venv-checkov: `make checkov`) over the umbrella's render of every values/
environment and ci/ scenario.

The gate: every check checkov fails is either fixed in the templates or skipped on the object with
checkov's own annotation and a reason a reviewer can read; and docs/security.md's table lists exactly the
skips the renders carry. All renders go to one folder and one checkov process (checkov's start-up is
most of its cost).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from render import helm_bin

from kvtier import helmyaml, paths
from kvtier.upstream import checkov

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
# ci/custom-values.yaml is left out: it sets unusual values on purpose (router UID 5151, engines 4242) to
# prove they reach the pods; a scanner's finding there is that user's choice, not the chart's.
SCENARIOS = sorted(p for p in (UMBRELLA / "ci").glob("*-values.yaml") if p.name != "custom-values.yaml")
CASES = [*sorted(paths.VALUES.glob("*.yaml")), *SCENARIOS]
SECURITY_DOC = paths.ROOT / "docs" / "security.md"
DOC_SECTION = "## Policy scanners: checkov"
SKIP_KEY = re.compile(r"^checkov\.io/skip\d+$")


def _file_name(values: Path) -> str:
    return f"{'ci-' if values.parent.name == 'ci' else ''}{values.stem}.yaml"


@pytest.fixture(scope="module")
def renders(need, tmp_path_factory) -> Path:
    """Every case's render, one file each, in one folder."""
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    folder = tmp_path_factory.mktemp("checkov-renders")
    for values in CASES:
        checkov.render_environment(values, folder / _file_name(values))
    return folder


@pytest.fixture(scope="module")
def findings(need, renders: Path) -> list[checkov.Finding]:
    need(not checkov.missing(), checkov.missing())
    return checkov.scan(renders)


def test_every_finding_is_fixed_or_skipped_with_a_reason(findings: list[checkov.Finding]) -> None:
    # checkov saw every environment (a render it could not read would be missing, not clean).
    assert {f.file for f in findings} == {_file_name(v) for v in CASES}
    refused = checkov.unjustified(findings)
    assert not refused, "checkov findings with neither a fix nor a reasoned skip:\n" + "\n".join(
        sorted(f.describe() for f in refused)
    )


def test_the_gate_refuses_a_skip_taken_away(renders: Path, tmp_path: Path, need) -> None:
    """The gate can fail: one object of one environment without its first skip annotation is reported,
    by checkov, as that check failed on that object."""
    need(not checkov.missing(), checkov.missing())
    source = renders / "prod-g6e-4xlarge.yaml"
    docs = [doc for doc in yaml.load_all(source.read_text(), Loader=helmyaml.Loader) if doc]
    target = next(d for d in docs if any(SKIP_KEY.match(k) for k in (d["metadata"].get("annotations") or {})))
    annotations = target["metadata"]["annotations"]
    key = next(k for k in sorted(annotations) if SKIP_KEY.match(k))
    check_id = annotations.pop(key).split("=", 1)[0]
    (tmp_path / "prod-g6e-4xlarge.yaml").write_text("---\n".join(helmyaml.dump(d) for d in docs))
    refused = checkov.unjustified(checkov.scan(tmp_path))
    assert [(f.check_id, f.kind, f.name) for f in refused] == [
        (check_id, target["kind"], target["metadata"]["name"])
    ]


def test_a_skip_without_a_reason_is_refused(tmp_path: Path, need) -> None:
    """A bare `checkov.io/skip1: CKV_K8S_XX` (no `=reason`) silences checkov but not the gate."""
    need(not checkov.missing(), checkov.missing())
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": "x", "annotations": {"checkov.io/skip1": "CKV_K8S_43"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]},
    }
    (tmp_path / "bare.yaml").write_text(helmyaml.dump(pod))
    found = checkov.scan(tmp_path)
    skipped = [f for f in found if f.check_id == "CKV_K8S_43"]
    assert [f.skipped for f in skipped] == [True]
    assert skipped[0] in checkov.unjustified(found)


def _doc_rows() -> set[tuple[str, str, str, str]]:
    """(check id, what it asks, template, reason) for every template the section's table names."""
    text = SECURITY_DOC.read_text()
    assert DOC_SECTION in text, f"{SECURITY_DOC}: no section {DOC_SECTION!r}"
    section = text.split(DOC_SECTION, 1)[1].split("\n## ", 1)[0]
    rows: set[tuple[str, str, str, str]] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.fullmatch(r"`CKV2?_K8S_\d+`", cells[0]):
            continue
        check, asks, objects, reason = cells
        for template in re.findall(r"`([^`]+)`", objects):
            rows.add((check.strip("`"), asks, template, reason))
    return rows


def test_security_doc_lists_exactly_the_skips_the_renders_carry(
    findings: list[checkov.Finding], renders: Path
) -> None:
    sources = {file.name: checkov.sources(file) for file in renders.glob("*.yaml")}
    carried = {
        (f.check_id, f.check_name, sources[f.file][(f.kind, f.namespace, f.name)], f.reason)
        for f in findings
        if f.skipped
    }
    documented = _doc_rows()
    assert carried, "no skip found in any render"
    assert sorted(documented - carried) == [], "docs/security.md lists skips no render carries"
    assert sorted(carried - documented) == [], "skips the renders carry that docs/security.md does not list"
