"""`kvtier package` pieces that need no registry: chart order, loopback rule, tags, release checks."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from kvtier import helm, paths
from kvtier.cli import main
from kvtier.errors import UserError
from kvtier.publish import package
from kvtier.publish.registry import Registry, is_loopback, tag
from kvtier.publish.versioning import chart_meta, ignore_patterns, packaged


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


@pytest.mark.parametrize("name", ["curvine", "kv-tiered-inference"])
def test_helmignore_reading_agrees_with_helm_package(name: str, tmp_path: Path, need) -> None:
    """The bump rule counts exactly the files the pinned Helm puts into the package."""
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    chart = paths.CHARTS / name
    need((chart / "Chart.yaml").exists(), f"charts/{name} is not written yet")
    helm.build_dependencies(chart)
    copy = tmp_path / name
    shutil.copytree(chart, copy)
    result = helm.run(["package", str(copy), "--destination", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    version = chart_meta(chart)["version"]
    # The built dependency (charts/, Chart.lock) comes from `helm dependency update`, not from git.
    built = ("charts/", "Chart.lock")
    with tarfile.open(tmp_path / f"{name}-{version}.tgz") as archive:
        in_package = {n.removeprefix(f"{name}/") for n in archive.getnames()}
    in_package = {f for f in in_package if not f.startswith(built)}
    patterns = ignore_patterns(copy)
    on_disk = {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}
    on_disk = {f for f in on_disk if not f.startswith(built)}
    assert {f for f in on_disk if packaged(f, patterns)} == in_package
    assert on_disk - in_package, "the chart has files Helm leaves out, so the comparison means something"


def test_output_json_lists_each_chart_packaged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["package", "--dry-run", "--chart", "curvine", "--destination", str(tmp_path), "-o", "json"]
    code = main(argv)
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["findings"] == [], report
    [chart] = report["charts"]
    assert (chart["chart"], chart["action"]) == ("curvine", "packaged")
    assert chart["version"] == chart_meta(paths.CHARTS / "curvine")["version"]
    assert Path(chart["package"]).parent == tmp_path and Path(chart["package"]).is_file()
