"""`kvtier package` pieces that need no registry: chart order, loopback rule, tags, release checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtier import package
from kvtier.errors import UserError
from kvtier.registry import Registry, is_loopback, tag


def _chart(root: Path, name: str, deps: tuple[str, ...] = ()) -> None:
    (root / name).mkdir(parents=True)
    lines = ["apiVersion: v2", f"name: {name}", "version: 0.1.0"]
    if deps:
        lines.append("dependencies:")
        lines += [f"  - {{name: {d}, version: 0.1.0, repository: file://../{d}}}" for d in deps]
    (root / name / "Chart.yaml").write_text("\n".join(lines) + "\n")


def test_dependencies_are_packaged_before_their_parent(tmp_path: Path) -> None:
    _chart(tmp_path, "a-umbrella", ("z-sub",))
    _chart(tmp_path, "z-sub")
    assert [p.name for p in package.discover(None, tmp_path)] == ["z-sub", "a-umbrella"]
    assert [p.name for p in package.discover(["a-umbrella"], tmp_path)] == ["a-umbrella"], (
        "a chart asked for alone is published alone (its package embeds the dependency)"
    )


def test_unknown_chart_name_is_a_user_error(tmp_path: Path) -> None:
    _chart(tmp_path, "curvine")
    with pytest.raises(UserError, match=r"no chart named curvin in .*did you mean curvine\?"):
        package.discover(["curvin"], tmp_path)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("127.1.2.3", True),
        ("10.0.0.1:5000", False),
        ("ghcr.io", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_plain_http_is_refused_for_a_remote_registry() -> None:
    with pytest.raises(UserError, match="only allowed for a loopback registry"):
        Registry("oci://ghcr.io/org/charts", plain_http=True)
    assert Registry("oci://ghcr.io/org/charts").ref("curvine") == "oci://ghcr.io/org/charts/curvine"


def test_semver_build_metadata_becomes_an_oci_safe_tag() -> None:
    assert tag("1.2.3+build.4") == "1.2.3_build.4"


def test_release_findings_stop_the_publish_before_packaging(tmp_path: Path) -> None:
    _chart(tmp_path, "demo")  # no CHANGELOG, no annotations
    outcomes, findings = package.publish(
        package.discover(None, tmp_path), None, tmp_path / "out", dry_run=True
    )
    assert outcomes == [] and not (tmp_path / "out").exists()
    assert {f.rule for f in findings} == {"changelog-entry", "artifacthub-changes", "artifacthub-annotation"}


def test_publish_without_a_registry_is_refused_before_any_work(tmp_path: Path) -> None:
    _chart(tmp_path, "demo")
    with pytest.raises(UserError, match="no registry given: pass --registry"):
        package.publish(package.discover(None, tmp_path), None, tmp_path / "out")
    assert not (tmp_path / "out").exists()
