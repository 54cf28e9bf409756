""".helmignore: `versioning.packaged` against what the pinned `helm package` really puts in the archive,
on generated charts and pattern lists, and the evidence for not using a gitignore library instead."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

import pathspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvtier import helm, paths
from kvtier.errors import UserError
from kvtier.publish.versioning import ignore_patterns, packaged

pytestmark = pytest.mark.charts

FILES = [
    "a.txt",
    "b.bak",
    "keep.bak",
    "README.md.gotmpl",
    "docs/x.txt",
    "docs/deep/y.txt",
    "a/b.txt",
    "a/b/c.txt",
    "x/a/b.txt",
    "tests/t_test.yaml",
    "ci/x-values.yaml",
    "templates/cm.yaml",
    "templates/.hidden.yaml",
    "templates/tests/hook.yaml",
]
# Shapes Helm treats specially: base-name rules, anchored rules, directory rules, `*` within one path
# segment, `**` (refused: `helm package` fails), and negation.
PATTERNS = [
    "*.bak",
    "*.txt",
    "/*.txt",
    "docs/",
    "/tests/",
    "tests/",
    "ci/",
    "a/*",
    "a/b.txt",
    "/a/b.txt",
    "**/y.txt",
    "docs/*/y.txt",
    "deep/",
    "*.gotmpl",
    "templates/tests/",
    "b.?ak",
    "[ab].txt",
    "!keep.bak",
    "!docs/",
]


def helm_package(files: list[str], patterns: list[str], workdir: Path) -> set[str] | None:
    """Chart-relative files in the archive `helm package` writes; None when Helm refuses the chart."""
    chart = workdir / "chart"
    chart.mkdir()
    for rel in ["Chart.yaml", *files]:
        path = chart / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("apiVersion: v2\nname: chart\nversion: 0.1.0\n" if rel == "Chart.yaml" else "k: v\n")
    (chart / ".helmignore").write_text("".join(f"{p}\n" for p in patterns))
    result = helm.run(["package", str(chart), "--destination", str(workdir)])
    if result.returncode != 0:
        return None
    with tarfile.open(workdir / "chart-0.1.0.tgz") as archive:
        return {n.removeprefix("chart/") for n in archive.getnames()}


@pytest.fixture(scope="module")
def helm3(need) -> None:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.sampled_from(FILES), min_size=1, max_size=8, unique=True),
    patterns=st.lists(st.sampled_from(PATTERNS), max_size=4, unique=True),
)
def test_packaged_agrees_with_helm_package(helm3: None, files: list[str], patterns: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        in_archive = helm_package(files, patterns, Path(tmp))
        try:
            read = ignore_patterns(Path(tmp) / "chart")
        except UserError:
            read = None
    everything = [*files, "Chart.yaml", ".helmignore"]
    if read is None:
        assert in_archive is None, f"Helm packaged a .helmignore that versioning refuses: {patterns}"
        return
    assert read == patterns
    if in_archive is None:
        # Helm refuses a chart whose Chart.yaml its own rules leave out (a negation does that).
        assert not packaged("Chart.yaml", patterns), f"helm package failed on {patterns}"
        return
    assert {f for f in everything if packaged(f, patterns)} == in_archive


def test_a_gitignore_library_disagrees_with_helm(helm3: None, tmp_path: Path) -> None:
    """Why versioning keeps its own matcher: under Helm's rules a negation ignores everything it does
    not match, under gitignore's (pathspec) it only re-includes what it matches. A `!docs/` keeps the
    chart's Chart.yaml out, so Helm refuses the chart; pathspec would package everything. If this
    fails, Helm moved to gitignore semantics and pathspec could replace versioning's matcher."""
    files = ["docs/x.txt", "templates/cm.yaml"]
    patterns = ["!docs/"]
    assert helm_package(files, patterns, tmp_path) is None
    spec = pathspec.GitIgnoreSpec.from_lines(["templates/.?*", *patterns])
    assert not spec.match_file("Chart.yaml"), "pathspec would package Chart.yaml"
    assert not packaged("Chart.yaml", patterns), "versioning leaves it out, as Helm does"


def test_double_star_is_refused_like_helm_refuses_it(helm3: None, tmp_path: Path) -> None:
    assert helm_package(["docs/deep/y.txt"], ["**/y.txt"], tmp_path) is None
    with pytest.raises(UserError, match=r"\.helmignore:1: `\*\*/y.txt`: Helm's .helmignore does not support"):
        ignore_patterns(tmp_path / "chart")
