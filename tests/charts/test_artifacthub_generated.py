"""Chart.yaml's generated Artifact Hub annotations (kvtier.generate.artifacthub): a hand edit that
disagrees with the render or with CHANGELOG.md is stale, and the rest of Chart.yaml is kept as written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from render import helm_bin

from kvtier import paths
from kvtier.generate import artifacthub


@pytest.fixture
def charts(need, tmp_path: Path) -> Path:
    """A copy of charts/ (the generator writes nothing; the umbrella packages its subchart in the copy)."""
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    copy = tmp_path / "charts"
    shutil.copytree(paths.CHARTS, copy, ignore=shutil.ignore_patterns("*.tgz", "Chart.lock"))
    return copy


def stale(charts: Path) -> list[str]:
    return [p.parent.name for p, text in artifacthub.expected(charts) if p.read_text() != text]


def _annotation(chart_yaml: Path, key: str) -> object:
    return yaml.safe_load(yaml.safe_load(chart_yaml.read_text())["annotations"][key])


@pytest.mark.parametrize("chart", ["curvine", "kv-tiered-inference"])
def test_a_hand_edited_image_annotation_is_stale(charts: Path, chart: str) -> None:
    assert stale(charts) == [], "charts/ is generated: run `kvtier generate`"
    chart_yaml = charts / chart / "Chart.yaml"
    text = chart_yaml.read_text()
    first = _annotation(chart_yaml, artifacthub.IMAGES_KEY)[0]["image"]
    assert ":" in first.rsplit("/", 1)[-1], first
    chart_yaml.write_text(text.replace(f"image: {first}", f"image: {first}-hand-edited", 1))
    assert stale(charts) == [chart]
    regenerated = dict(artifacthub.expected(charts))[chart_yaml]
    assert regenerated == text, "the generator restores the annotation and keeps every other line"


def test_a_hand_edited_changes_annotation_is_stale(charts: Path) -> None:
    chart_yaml = charts / "curvine" / "Chart.yaml"
    changes = _annotation(chart_yaml, artifacthub.CHANGES_KEY)
    assert changes, "the chart's version has CHANGELOG entries"
    text = chart_yaml.read_text()
    chart_yaml.write_text(
        text.replace("- kind: ", "- kind: security\n      description: not in CHANGELOG.md\n    - kind: ", 1)
    )
    assert stale(charts) == ["curvine"]


def test_images_follow_the_render_and_changes_follow_the_changelog(charts: Path) -> None:
    curvine = charts / "curvine"
    values = curvine / "values.yaml"
    old = "repository: sig-storage/livenessprobe\n"
    assert old in values.read_text()
    values.write_text(values.read_text().replace(old, "repository: sig-storage/livenessprobe-mirrored\n"))
    changelog = curvine / "CHANGELOG.md"
    version = yaml.safe_load((curvine / "Chart.yaml").read_text())["version"]
    heading = next(line for line in changelog.read_text().splitlines() if line.startswith(f"## {version}"))
    changelog.write_text(
        changelog.read_text().replace(heading, f"{heading}\n\n### Security\n\n- A new entry.", 1)
    )
    for path, text in artifacthub.expected(charts):
        path.write_text(text)
    images = {i["image"] for i in _annotation(curvine / "Chart.yaml", artifacthub.IMAGES_KEY)}
    assert any("livenessprobe-mirrored:" in i for i in images), images
    changes = _annotation(curvine / "Chart.yaml", artifacthub.CHANGES_KEY)
    assert changes[0] == {"kind": "security", "description": "A new entry."}
    assert stale(charts) == []
